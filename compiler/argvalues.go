package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// argsChecked is why the values an args schema allows are the only ones a
// predicate sees.
const argsChecked = "a call's arguments are checked against its tool's schema before any layer"

// schemaRefuses says why a dead comparison of an argument is a warning
// where it would otherwise be an error: it fails to catch only calls the
// schema refuses anyway.
const schemaRefuses = "no call gets through by it (the schema refuses those values), but the test is dead"

// valueChecked and valueRefuses are argsChecked and schemaRefuses for the
// value of a state handler.
const (
	valueChecked = "a value is checked against the field's schema before the handlers"
	valueRefuses = "no value gets through by it (the schema refuses those values), but the test is dead"
)

// maxExact is the largest magnitude up to which a float64 holds every
// integer: numbers beyond it are not compared, as rounding could decide.
const maxExact = 1 << 53

// argValues are the values the args schemas of the tools a predicate sees
// let one argument hold.
type argValues struct {
	// tools are the tools whose schemas describe it, quoted (`pay`).
	tools []string
	// strs are the strings it may be, when each schema gives it an enum
	// (or a const) of strings.
	strs      []string
	strsKnown bool
	// nums are the numbers it may be, one domain a schema, when each
	// allows numbers only.
	nums      []numDomain
	numsKnown bool
	// state is set for the value of a state handler, whose field's schema
	// gives its numbers.
	state bool
}

// numDomain is the numbers one schema lets an argument be: the values of
// its enum or const (set), or those between its bounds.
type numDomain struct {
	set            []float64
	isSet          bool
	lo, hi         float64
	loOpen, hiOpen bool
	// integer is set when every value is an integer.
	integer bool
	// desc is the schema's words for it ("maximum: 5000", "enum: [1, 2]").
	desc string
}

// argValuesAt returns what the args schemas of the tools a tool-stage
// predicate of an entry scoped to scope can see let the argument at path
// ("currency", "items[].sku") hold; false when a call may carry it
// unchecked: a tool in scope the policy does not declare with an args
// schema, an unscoped entry where tools the policy does not declare may be
// called, a tool whose schema lets the argument be there without
// describing it, or a file_check path_arg (the layer hands the layers
// inside it the resolved real path). A tool whose schema shuts the
// argument out (additionalProperties: false) is left out: its calls never
// carry it.
func (c *Compilation) argValuesAt(path string, scope []string) (argValues, bool) {
	p := c.Policy
	tools, ok := c.toolsSeen(scope)
	if !ok {
		return argValues{}, false
	}
	steps := strings.Split(path, ".")
	top := strings.TrimRight(steps[0], "[]")
	v := argValues{strsKnown: true, numsKnown: true}
	for _, name := range slices.Sorted(slices.Values(tools)) {
		t := p.Tools[name]
		if t == nil || len(t.Args) == 0 {
			return argValues{}, false
		}
		for _, ref := range t.PathArgs {
			if a, err := argpath.Parse(ref); err == nil && a.Tokens()[0] == top {
				return argValues{}, false
			}
		}
		s, found := schemaAt(t.Args, steps)
		if !found {
			if names, closed := t.ClosedArgNames(); len(scope) == 0 && closed && !slices.Contains(names, top) {
				continue
			}
			return argValues{}, false
		}
		v.tools = append(v.tools, "`"+name+"`")
		strs, strsOK, num, numOK := schemaValues(s)
		v.strsKnown = v.strsKnown && strsOK
		v.numsKnown = v.numsKnown && numOK
		if !v.strsKnown && !v.numsKnown {
			return argValues{}, false
		}
		for _, s := range strs {
			if !slices.Contains(v.strs, s) {
				v.strs = append(v.strs, s)
			}
		}
		v.nums = append(v.nums, num)
	}
	slices.Sort(v.strs)
	return v, len(v.tools) > 0
}

// toolsSeen returns the tools a tool-stage predicate of an entry scoped to
// scope sees: those, or, unscoped, every declared tool; false when tools
// the policy does not declare may be called too.
func (c *Compilation) toolsSeen(scope []string) ([]string, bool) {
	p := c.Policy
	if len(scope) > 0 {
		return scope, true
	}
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
		return nil, false
	}
	return sortedNames(p.Tools), true
}

// schemaAt returns the schema an args schema gives the value at steps, a
// field path whose steps may end in [] for the elements of a list
// ("items[]", "sku"), following properties and items, and whether it
// describes it.
func schemaAt(schema json.RawMessage, steps []string) (json.RawMessage, bool) {
	for _, step := range steps {
		name := strings.TrimRight(step, "[]")
		s, ok := subSchema(schema, []string{name})
		if !ok {
			return nil, false
		}
		for range (len(step) - len(name)) / 2 {
			// A macro over an object ranges over its keys: the list must
			// be one.
			var arr struct {
				Type  any             `json:"type"`
				Items json.RawMessage `json:"items"`
			}
			if json.Unmarshal(s, &arr) != nil || arr.Type != "array" || !bytes.HasPrefix(bytes.TrimSpace(arr.Items), []byte("{")) {
				return nil, false
			}
			s = arr.Items
		}
		schema = s
	}
	return schema, true
}

// schemaValues reads what one schema lets a value be: the strings of an
// enum or const of strings (strsOK), or the numbers of one of numbers or
// of a number or integer type with its bounds (numOK). A schema that
// allows other values too says neither.
func schemaValues(schema json.RawMessage) (strs []string, strsOK bool, num numDomain, numOK bool) {
	var s struct {
		Const            json.RawMessage   `json:"const"`
		Enum             []json.RawMessage `json:"enum"`
		Minimum          *float64          `json:"minimum"`
		Maximum          *float64          `json:"maximum"`
		ExclusiveMinimum any               `json:"exclusiveMinimum"`
		ExclusiveMaximum any               `json:"exclusiveMaximum"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, false, numDomain{}, false
	}
	vals, word := s.Enum, "enum"
	if len(s.Const) > 0 {
		vals, word = []json.RawMessage{s.Const}, "const"
	}
	if vals != nil {
		if len(vals) == 0 {
			return nil, false, numDomain{}, false
		}
		var texts []string
		strsOK, numOK = true, true
		num.isSet = true
		for _, raw := range vals {
			text := string(bytes.TrimSpace(raw))
			texts = append(texts, text)
			var str string
			if text == "null" {
				// A null reads as absent.
				return nil, false, numDomain{}, false
			}
			if json.Unmarshal(raw, &str) == nil {
				strs = append(strs, str)
				numOK = false
				continue
			}
			strsOK = false
			var n float64
			if json.Unmarshal(raw, &n) != nil || math.Abs(n) > maxExact {
				numOK = false
				continue
			}
			num.set = append(num.set, n)
		}
		num.integer = !slices.ContainsFunc(num.set, func(n float64) bool { return n != math.Trunc(n) })
		if word == "const" {
			num.desc = "const: " + texts[0]
		} else {
			num.desc = "enum: [" + strings.Join(texts, ", ") + "]"
		}
		return strs, strsOK, num, numOK
	}
	t, _, _ := argType(schema, nil)
	if t != "number" && t != "integer" {
		return nil, false, numDomain{}, false
	}
	num = numDomain{lo: math.Inf(-1), hi: math.Inf(1), integer: t == "integer"}
	var words []string
	bound := func(v *float64, name string, at *float64, open *bool, isOpen bool, tighter func(a, b float64) bool) {
		if v == nil {
			return
		}
		words = append(words, name+": "+strconv.FormatFloat(*v, 'g', -1, 64))
		if math.Abs(*v) > maxExact {
			return // a float64 may not hold it: no bound is surer than a wrong one
		}
		if tighter(*v, *at) || *v == *at && isOpen {
			*at, *open = *v, isOpen
		}
	}
	lower := func(a, b float64) bool { return a > b }
	upper := func(a, b float64) bool { return a < b }
	// Draft 4 writes an exclusive bound as exclusiveMinimum: true beside
	// minimum; 2020-12 as a number.
	minOpen, _ := s.ExclusiveMinimum.(bool)
	maxOpen, _ := s.ExclusiveMaximum.(bool)
	bound(s.Minimum, "minimum", &num.lo, &num.loOpen, minOpen, lower)
	if v, ok := s.ExclusiveMinimum.(float64); ok {
		bound(&v, "exclusiveMinimum", &num.lo, &num.loOpen, true, lower)
	} else if minOpen && s.Minimum != nil {
		words = append(words, "exclusiveMinimum: true")
	}
	bound(s.Maximum, "maximum", &num.hi, &num.hiOpen, maxOpen, upper)
	if v, ok := s.ExclusiveMaximum.(float64); ok {
		bound(&v, "exclusiveMaximum", &num.hi, &num.hiOpen, true, upper)
	} else if maxOpen && s.Maximum != nil {
		words = append(words, "exclusiveMaximum: true")
	}
	num.desc = strings.Join(words, ", ")
	if num.desc == "" {
		num.desc = "no bounds"
	}
	return nil, false, num, true
}

// test reports whether the argument op v never holds, or always holds,
// for every number of d.
func (d numDomain) test(op string, v float64) (never, always bool) {
	if d.isSet {
		never, always = true, true
		for _, n := range d.set {
			holds := compareNumbers(n, op, v)
			never, always = never && !holds, always && holds
		}
		return never, always
	}
	lo, hi := d.lo, d.hi
	switch op {
	case "==", "in":
		return v < lo || v > hi || v == lo && d.loOpen || v == hi && d.hiOpen, false
	case "!=":
		return false, v < lo || v > hi || v == lo && d.loOpen || v == hi && d.hiOpen
	case ">":
		return hi <= v, lo > v || lo == v && d.loOpen
	case ">=":
		return hi < v || hi == v && d.hiOpen, lo >= v
	case "<":
		return lo >= v, hi < v || hi == v && d.hiOpen
	case "<=":
		return lo > v || lo == v && d.loOpen, hi <= v
	}
	return false, false
}

// atBound reports whether v is where d's values end, or 0: a test against
// it restates the schema's bound (args.amount > 0.0 where its
// exclusiveMinimum is 0, args.top_k > 50 where its maximum is 50) or
// checks a sign, as a policy may to hold whatever the schema says.
func (d numDomain) atBound(v float64) bool {
	lo, hi := d.lo, d.hi
	if d.isSet {
		lo, hi = slices.Min(d.set), slices.Max(d.set)
	}
	near := func(b float64) bool { return v == b || d.integer && math.Abs(v-b) <= 1 }
	return v == 0 || near(lo) || near(hi)
}

// compareNumbers evaluates a op b.
func compareNumbers(a float64, op string, b float64) bool {
	switch op {
	case "==", "in":
		return a == b
	case "!=":
		return a != b
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "<":
		return a < b
	case "<=":
		return a <= b
	}
	return false
}

// test reports whether the argument op v never holds, or always holds,
// whatever number the schemas let it be.
func (a argValues) test(op string, v float64) (never, always bool) {
	never, always = true, true
	for _, d := range a.nums {
		n, al := d.test(op, v)
		never, always = never && n, always && al
	}
	return never, always
}

// atBound reports whether v is where the values of one of a's domains end,
// or 0 (numDomain.atBound).
func (a argValues) atBound(v float64) bool {
	return slices.ContainsFunc(a.nums, func(d numDomain) bool { return d.atBound(v) })
}

// schemaWords says what the schemas give the argument at path: "the args
// schema of `refund` gives args.amount maximum: 5000", "the args schemas
// give args.level enum: [1, 2] (`a`), minimum: 0 (`b`)".
func (a argValues) schemaWords(path string) string {
	if a.state {
		return fmt.Sprintf("the field's schema gives %s %s", path, a.nums[0].desc)
	}
	if len(a.nums) == 1 {
		return fmt.Sprintf("the args schema of %s gives %s %s", a.tools[0], path, a.nums[0].desc)
	}
	parts := make([]string, len(a.nums))
	for i, d := range a.nums {
		parts[i] = fmt.Sprintf("%s (%s)", d.desc, a.tools[i])
	}
	return fmt.Sprintf("the args schemas give %s %s", path, strings.Join(parts, ", "))
}

// numbersAt returns the numbers the field at path of a predicate may be:
// an argument's (argValuesAt) in the tool stage, the value's in a state
// handler (its field's schema, c.stateValue), as either is checked against
// its schema before the predicate reads it.
func (c *Compilation) numbersAt(path string, scope []string) (argValues, bool) {
	if len(c.stateValue) > 0 {
		if path != "value" && !strings.HasPrefix(path, "value.") {
			return argValues{}, false
		}
		s, found := schemaAt(c.stateValue, strings.Split(path, ".")[1:])
		if !found {
			return argValues{}, false
		}
		_, _, num, ok := schemaValues(s)
		return argValues{nums: []numDomain{num}, numsKnown: ok, state: true}, ok
	}
	if arg, ok := strings.CutPrefix(path, "args."); ok {
		return c.argValuesAt(arg, scope)
	}
	return argValues{}, false
}

// checkArgNumbers reports each comparison of an argument, or of a state
// handler's value (numbersAt), with a number that the args schemas of the
// tools the predicate sees, or the field's schema, decide: never true
// (args.amount > 10000 where its maximum is 5000; args.level == 7 where its
// enum is [1, 2, 3]; value.seats > 20 where its maximum is 10) or always
// true (args.amount >= 0 where its minimum is 0). Its severity follows what that makes of the predicate, as
// checkLiterals' does. A test that can only make the predicate fail open
// and whose constant sits at a bound (args.amount > 0.0 where its
// exclusiveMinimum is 0) or is 0 is not reported: it restates what the
// schema refuses, as a policy may to hold whatever the schema says.
func (c *Compilation) checkArgNumbers(x *dsl.Expr, scope []string, literals []predicate.Literal, field string) {
	type finding struct {
		l             predicate.Literal
		a             argValues
		v             float64
		never, always bool
	}
	var found []finding
	live := map[int]bool{}
	for _, l := range literals {
		if celKind(l.Kind) != "number" {
			continue
		}
		a, ok := c.numbersAt(l.Path, scope)
		if !ok || !a.numsKnown {
			continue
		}
		v, err := strconv.ParseFloat(l.Value, 64)
		if err != nil || math.IsNaN(v) || math.Abs(v) > maxExact {
			continue
		}
		never, always := a.test(l.Op, v)
		if l.List > 0 && !never {
			live[l.List] = true
		}
		if never || always && l.Op != "in" {
			found = append(found, finding{l, a, v, never, always})
		}
	}
	for _, f := range found {
		l := f.l
		constant := numberText(x.Source, l.Offset)
		sev, note := dsl.Error, ""
		var outcome string
		switch {
		case l.Op == "in" && live[l.List]:
			outcome, sev = fmt.Sprintf("%s in the list never matches (its other values may)", constant), dsl.Warning
		case l.Op == "in":
			if slices.ContainsFunc(found, func(o finding) bool { return o.l.List == l.List && o.l.Offset < l.Offset }) {
				continue // reported at the list's first constant
			}
			outcome = "the in test is always false"
			sev, note = deadSeverity(field, x.Source, l.Offset, false)
		default:
			outcome = fmt.Sprintf("%s %s %s is always %t", l.Path, l.Op, constant, f.always)
			sev, note = deadSeverity(field, x.Source, l.Offset, f.always)
		}
		if note == "" && f.a.atBound(f.v) {
			continue // it restates a bound, or tests a sign
		}
		checked, refuses := argsChecked, schemaRefuses
		if f.a.state {
			checked, refuses = valueChecked, valueRefuses
		}
		if sev == dsl.Error {
			// Dead where it was meant to catch calls: the schema
			// refuses them before it (see checkLiterals).
			sev, note = dsl.Warning, ": "+refuses
		}
		c.report(dsl.Diagnostic{Pos: x.PosAt(l.Offset), Severity: sev, Rule: ruleUnknownValue,
			Message: fmt.Sprintf("%s: %s, and %s%s", outcome, f.a.schemaWords(l.Path), checked, strings.Replace(note, ": ", "; ", 1))})
	}
}

// deadSeverity returns the severity of a comparison that is always value
// at offset in src, a predicate of field (see checkLiterals), and the note
// saying why when it is a warning: where it can only make the predicate
// fail closed (a deny that blocks more calls, never fewer).
func deadSeverity(field, src string, offset int, value bool) (dsl.Severity, string) {
	pol := comparisonPolarity(src, offset)
	if !value {
		pol = -pol
	}
	if closed := closedWhenTrue(field, pol); closed != "" {
		return dsl.Warning, ": " + closed
	}
	return dsl.Error, ""
}

// numberText returns the numeric constant at offset in src as written
// (-2.5, 100u, 1e3).
func numberText(src string, offset int) string {
	end := offset
	for end < len(src) {
		b := src[end]
		switch {
		case b >= '0' && b <= '9', b == '.', b == 'x', b == 'X', b == 'u', b == 'U',
			b >= 'a' && b <= 'f', b >= 'A' && b <= 'F',
			b == '-' && (end == offset || src[end-1] == 'e' || src[end-1] == 'E'),
			b == '+' && end > offset && (src[end-1] == 'e' || src[end-1] == 'E'):
			end++
			continue
		}
		break
	}
	return src[offset:end]
}
