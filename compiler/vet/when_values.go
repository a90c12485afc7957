package vet

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
)

// ruleUnknownValue is the compiler's rule for a field compared with a
// value it never holds; a constraint's when comparing a config field of
// fixed values (a log's level, a rate_limit's mode) with another string
// reports under it too.
const ruleUnknownValue = "cel/unknown-value"

// whenLiteral is a comparison in a constraint's when of a config field of
// outer or inner with a string constant.
type whenLiteral struct {
	v, field, op string // "outer", "level", "==" | "!=" | "in"
	list         int    // numbers the in lists from 1; 0 for == and !=
	value        string
	offset       int // byte offset of the constant's opening quote
}

// whenValueProblems reports each comparison in the when of c of a config
// field whose values the schema fixes with a string it never holds:
// outer.level == "debugg" is always false, so the constraint never applies.
// A name designating several kinds (an entry named after another builtin)
// is compared with the values of all of them; a field one of them holds
// freely is not checked.
func whenValueProblems(c *dsl.Constraint) dsl.Diagnostics {
	if c.When == nil || envs() != nil {
		return nil
	}
	parsed, iss := constraintEnv.Parse(c.When.Source)
	if iss.Err() != nil {
		return nil
	}
	native := parsed.NativeRep()
	var lits []whenLiteral
	lists := 0
	byteOff := func(e ast.Expr) int {
		r, ok := native.SourceInfo().GetOffsetRange(e.ID())
		if !ok {
			return 0
		}
		return runeToByte(c.When.Source, int(r.Start))
	}
	add := func(op string, list int, field, value ast.Expr) {
		v, f, ok := configField(field)
		if !ok || value.Kind() != ast.LiteralKind {
			return
		}
		s, ok := value.AsLiteral().(types.String)
		if !ok {
			return
		}
		lits = append(lits, whenLiteral{v: v, field: f, op: op, list: list, value: string(s), offset: byteOff(value)})
	}
	// One walk of the when finds the comparisons of both checks: with a
	// string (lits, reported below) and with a number (boundChecker).
	var bounds dsl.Diagnostics
	checkBound := boundChecker(c, byteOff, &bounds)
	ast.PostOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		checkBound(e)
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.Equals, operators.NotEquals:
			if len(args) != 2 {
				return
			}
			op := "=="
			if call.FunctionName() == operators.NotEquals {
				op = "!="
			}
			add(op, 0, args[0], args[1])
			add(op, 0, args[1], args[0])
		case operators.In:
			if len(args) == 2 && args[1].Kind() == ast.ListKind {
				lists++
				for _, el := range args[1].AsList().Elements() {
					add("in", lists, args[0], el)
				}
			}
		}
	}))
	values := func(l whenLiteral) ([]string, bool) {
		kinds := c.OuterKinds
		if l.v == "inner" {
			kinds = c.InnerKinds
		}
		var out []string
		for _, k := range kinds {
			if k.Config == nil {
				return nil, false
			}
			if _, has := k.Config[l.field]; !has {
				continue
			}
			enum, ok := k.Enums[l.field]
			if !ok {
				return nil, false
			}
			out = append(out, enum...)
		}
		slices.Sort(out)
		return slices.Compact(out), len(out) > 0
	}
	live := map[int]bool{}
	for _, l := range lits {
		if vals, ok := values(l); ok && l.list > 0 && slices.Contains(vals, l.value) {
			live[l.list] = true
		}
	}
	var out dsl.Diagnostics
	for _, l := range lits {
		vals, ok := values(l)
		if !ok || slices.Contains(vals, l.value) {
			continue
		}
		path := l.v + "." + l.field
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = "'" + v + "'"
		}
		sev := dsl.Error
		var outcome string
		switch {
		case l.op == "!=":
			outcome = fmt.Sprintf("%s != '%s' is always true", path, l.value)
		case l.op == "in" && live[l.list]:
			outcome, sev = fmt.Sprintf("'%s' in the list never matches (its other values may)", l.value), dsl.Warning
		case l.op == "in":
			outcome = "the in test is always false, and the constraint may never apply"
		default:
			outcome = fmt.Sprintf("%s == '%s' is always false, and the constraint may never apply", path, l.value)
		}
		name := c.Outer
		if l.v == "inner" {
			name = c.Inner
		}
		msg := fmt.Sprintf("constraint %s: when: %s is never '%s': the schema of %s allows %s only, so %s",
			c.ID, path, l.value, name, orList(quoted), outcome)
		if best := textdist.Closest(l.value, vals); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		out = append(out, dsl.Diagnostic{Pos: c.When.PosAt(l.offset), Severity: sev, Rule: ruleUnknownValue, Message: msg})
	}
	return append(out, bounds...)
}

// flipped is the comparison b op' a for a op b.
var flipped = map[string]string{"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

// comparisonOps names the comparisons of CEL's operators.
var comparisonOps = map[string]string{operators.Equals: "==", operators.NotEquals: "!=", operators.Less: "<",
	operators.LessEquals: "<=", operators.Greater: ">", operators.GreaterEquals: ">="}

// boundChecker returns a check of one call of the when of c, which
// appends to out a comparison of a numeric config field the schema bounds
// with a number that decides it: outer.max_attempts > 100, where
// max_attempts is at most 10, is always false, so the constraint never
// applies (an error); inner.rate < 1e12 is always true (a warning: the
// test is dead). An always true test whose number is 0 or sits at the
// bound (outer.max_attempts >= 1) restates the schema, as a constraint
// may, and is not reported. whenValueProblems calls it on each call of
// its one walk of the when.
func boundChecker(c *dsl.Constraint, byteOff func(ast.Expr) int, out *dsl.Diagnostics) func(e ast.Expr) {
	// bound returns the bounds of the config field e reads, with its
	// variable, field and the name of the layer its variable designates.
	bound := func(e ast.Expr) (b dsl.Bound, v, f, name string, ok bool) {
		v, f, ok = configField(e)
		if !ok {
			return b, "", "", "", false
		}
		name, kinds := c.Outer, c.OuterKinds
		if v == "inner" {
			name, kinds = c.Inner, c.InnerKinds
		}
		b, ok = fieldBound(kinds, f)
		return b, v, f, name, ok
	}
	report := func(value ast.Expr, sev dsl.Severity, name, v, f string, b dsl.Bound, outcome string) {
		*out = append(*out, dsl.Diagnostic{Pos: c.When.PosAt(byteOff(value)), Severity: sev, Rule: ruleUnknownValue, Message: fmt.Sprintf(
			"constraint %s: when: the schema of %s allows %s.%s %s only, so %s", c.ID, name, v, f, b.Words(), outcome)})
	}
	return func(e ast.Expr) {
		args := e.AsCall().Args()
		if len(args) != 2 {
			return
		}
		if e.AsCall().FunctionName() == operators.In && args[1].Kind() == ast.ListKind {
			// outer.max_attempts in [20, 30]: never where no number of
			// the list is within the bounds; a dead number beside live
			// ones is a warning.
			b, v, f, name, ok := bound(args[0])
			if !ok {
				return
			}
			var dead []ast.Expr
			live := false
			for _, el := range args[1].AsList().Elements() {
				n, isNum := numberLiteral(el)
				if never, _ := boundTest(b, "==", n); isNum && never {
					dead = append(dead, el)
				} else {
					live = true
				}
			}
			for i, el := range dead {
				lit := el.AsLiteral().ConvertToType(types.StringType).Value()
				switch {
				case live:
					report(el, dsl.Warning, name, v, f, b, fmt.Sprintf("%v in the list never matches (its other values may)", lit))
				case i == 0:
					report(el, dsl.Error, name, v, f, b, "the in test is always false, and the constraint may never apply")
				}
			}
			return
		}
		op, ok := comparisonOps[e.AsCall().FunctionName()]
		if !ok {
			return
		}
		field, value := args[0], args[1]
		if _, _, ok := configField(field); !ok {
			field, value, op = value, field, flipped[op]
		}
		n, isNum := numberLiteral(value)
		b, v, f, name, ok := bound(field)
		if !ok || !isNum {
			return
		}
		never, always := boundTest(b, op, n)
		atBound := n == 0 || b.HasMin && n == b.Min || b.HasMax && n == b.Max
		if !never && (!always || atBound) {
			return
		}
		test := fmt.Sprintf("%s.%s %s %s", v, f, op, value.AsLiteral().ConvertToType(types.StringType).Value())
		if never {
			report(value, dsl.Error, name, v, f, b, test+" is always false, and the constraint may never apply")
		} else {
			report(value, dsl.Warning, name, v, f, b, test+" is always true, and the test decides nothing")
		}
	}
}

// numberLiteral returns the number a numeric literal e holds.
func numberLiteral(e ast.Expr) (float64, bool) {
	if e.Kind() != ast.LiteralKind {
		return 0, false
	}
	switch lit := e.AsLiteral().(type) {
	case types.Int:
		return float64(lit), true
	case types.Uint:
		return float64(lit), true
	case types.Double:
		return float64(lit), true
	}
	return 0, false
}

// fieldBound returns the bounds of field (a dotted path for a nested
// one) over kinds, the widest of each side; false when a kind holding the
// field, or the struct it is in, leaves it unbounded, or its config is
// unknown.
func fieldBound(kinds []*dsl.Kind, field string) (dsl.Bound, bool) {
	var out dsl.Bound
	found := false
	for _, k := range kinds {
		if k.Config == nil {
			return dsl.Bound{}, false
		}
		top, _, _ := strings.Cut(field, ".")
		if _, has := k.Config[top]; !has {
			continue
		}
		b, ok := k.Bounds[field]
		if !ok {
			return dsl.Bound{}, false
		}
		if !found {
			out, found = b, true
			continue
		}
		out.Widen(b)
	}
	return out, found
}

// boundTest reports whether x op n never holds, or always holds, for
// every number x of b.
func boundTest(b dsl.Bound, op string, n float64) (never, always bool) {
	below := b.HasMin && (n < b.Min || n == b.Min && b.MinOpen) // n under every x
	above := b.HasMax && (n > b.Max || n == b.Max && b.MaxOpen) // n over every x
	switch op {
	case "==":
		return below || above, false
	case "!=":
		return false, below || above
	case ">":
		return b.HasMax && b.Max <= n, below
	case ">=":
		return above, b.HasMin && b.Min >= n
	case "<":
		return b.HasMin && b.Min >= n, above
	case "<=":
		return below, b.HasMax && b.Max <= n
	}
	return false, false
}

// configField reports the variable and field e reads: outer.level,
// inner['mode'], a nested struct's field by its dotted path
// (outer.breaker.failures, inner['budget']['calls']: "breaker.failures").
func configField(e ast.Expr) (v, field string, ok bool) {
	var operand ast.Expr
	switch e.Kind() {
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return "", "", false
		}
		operand, field = sel.Operand(), sel.FieldName()
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() != operators.Index || len(args) != 2 || args[1].Kind() != ast.LiteralKind {
			return "", "", false
		}
		s, isStr := args[1].AsLiteral().(types.String)
		if !isStr {
			return "", "", false
		}
		operand, field = args[0], string(s)
	default:
		return "", "", false
	}
	if operand.Kind() == ast.IdentKind {
		v = operand.AsIdent()
		return v, field, v == "outer" || v == "inner"
	}
	v, parent, ok := configField(operand)
	return v, parent + "." + field, ok
}

// runeToByte converts a code-point offset of src into a byte offset.
func runeToByte(src string, runes int) int {
	off := 0
	for n := 0; n < runes && off < len(src); n++ {
		_, size := utf8.DecodeRuneInString(src[off:])
		off += size
	}
	return off
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
