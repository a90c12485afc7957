package outputcoerce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/resultjson"
	"github.com/agentc-dev/agentc/runtime"
)

// prefixChecker reads a model's output as it streams (partial: true) and
// reports the first byte after which the output can no longer become valid
// (see the package documentation for what a valid prefix is). It parses the
// JSON incrementally, builds each value as it completes, and checks it
// against the subschemas that apply at its location.
type prefixChecker struct {
	root *jsonschema.Schema

	phase   phase
	fenced  bool
	ticks   int // backticks of a fence read so far
	offset  int // bytes read so far
	stack   []*frame
	scalar  scalarState
	value   any // the root value, once complete
	diags   []Diagnostic
	trailer int // backticks of the closing fence read so far
	// values counts the values completed so far; work estimates what the
	// checks of completed containers cost: a container's values times its
	// height (the validator builds each location's path from its parent's).
	// Checking each enclosing container of a deep value anew would be
	// polynomial in the depth, so a container is left to the check of the
	// whole value once work would pass workFactor times values.
	values, work int
}

// workFactor bounds the checks of completed containers: they go over at
// most this many values per value of the output (and the whole value is
// always checked when it completes).
const workFactor = 16

type phase uint8

const (
	phaseLead     phase = iota // leading whitespace, or the opening fence
	phaseFenceTag              // the opening fence's language tag, up to its newline
	phaseValue                 // inside the value
	phaseTrail                 // after the value: whitespace, the closing fence
	phaseRest                  // after the closing fence: ignored
)

// frame is an object or array being read.
type frame struct {
	object  bool
	path    string
	schemas []*jsonschema.Schema
	obj     map[string]any
	arr     []any
	key     string
	// keys holds the object's keys so far, folded (jsonwalk.FoldKey): a
	// key given twice is refused as the full check refuses it.
	keys   map[string]struct{}
	n      int // members or elements so far
	size   int // values completed inside, at any depth
	height int // nesting depth inside: 0 when it holds no container
	// expect is what the next significant byte must be.
	expect expect
}

type expect uint8

const (
	expectValueOrClose expect = iota // after '[' (or '{': a key or '}')
	expectValue                      // after ',' in an array, or ':' in an object
	expectKey                        // after ',' in an object
	expectColon                      // after a key
	expectCommaOrClose               // after a member or an element
)

// scalarState is the string, number or literal being read.
type scalarState struct {
	kind    byte // 0 (none), '"', 'n' (number), 'l' (literal)
	raw     []byte
	escape  int  // bytes of an escape sequence still expected (0: none; -1: after '\')
	key     bool // the string is an object key
	literal string
	schemas []*jsonschema.Schema
	path    string
}

// failed reports whether the prefix can no longer become valid.
func (p *prefixChecker) failed() bool { return p.diags != nil }

// complete reports whether the whole value has been read and validated.
func (p *prefixChecker) complete() bool { return p.phase >= phaseTrail && p.diags == nil }

func (p *prefixChecker) syntax(format string, args ...any) {
	p.diags = []Diagnostic{{Message: fmt.Sprintf("not valid JSON: "+format+" at offset %d", append(args, p.offset)...)}}
}

// write feeds text to the checker; it returns false once the prefix read so
// far can no longer become valid.
func (p *prefixChecker) write(text string) bool {
	for i := 0; i < len(text) && p.diags == nil; i++ {
		p.byte(text[i])
		p.offset++
	}
	return p.diags == nil
}

// finish ends the stream: a value still open is not valid JSON; a number at
// the root completes.
func (p *prefixChecker) finish() {
	if p.diags != nil {
		return
	}
	switch {
	case p.phase == phaseValue && p.scalar.kind == 'n' && len(p.stack) == 0:
		p.endScalar()
	case p.phase < phaseTrail:
		p.syntax("unexpected end of JSON input")
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *prefixChecker) byte(c byte) {
	switch p.phase {
	case phaseLead:
		switch {
		case c == '`' && !p.fenced:
			p.ticks++
			if p.ticks == 3 {
				p.fenced = true
				p.phase = phaseFenceTag
			}
		case p.ticks > 0:
			p.syntax("invalid character %q in a code fence", c)
		case isSpace(c):
		default:
			p.phase = phaseValue
			p.startValue(c, "", p.expand([]*jsonschema.Schema{p.root}))
		}
	case phaseFenceTag:
		if c == '\n' {
			p.phase = phaseLead
			p.ticks = 0
		}
	case phaseValue:
		p.valueByte(c)
	case phaseTrail:
		switch {
		case p.fenced && c == '`':
			p.trailer++
			if p.trailer == 3 {
				p.phase = phaseRest
			}
		case p.trailer == 0 && isSpace(c):
		default:
			p.syntax("invalid character %q after the value", c)
		}
	case phaseRest:
	}
}

// valueByte reads one byte inside the value.
func (p *prefixChecker) valueByte(c byte) {
	if p.scalar.kind != 0 {
		if !p.scalarByte(c) {
			return // consumed
		}
		// The number ended at c, which belongs to the enclosing container.
		if p.diags != nil {
			return
		}
		if len(p.stack) == 0 {
			p.phase = phaseTrail
			p.byte(c)
			return
		}
	}
	if len(p.stack) == 0 {
		return
	}
	f := p.stack[len(p.stack)-1]
	if isSpace(c) {
		return
	}
	switch f.expect {
	case expectValueOrClose:
		if f.object {
			switch c {
			case '}':
				p.closeFrame()
			case '"':
				p.startKey(f)
			default:
				p.syntax("invalid character %q looking for an object key", c)
			}
			return
		}
		if c == ']' {
			p.closeFrame()
			return
		}
		p.startElement(f, c)
	case expectValue:
		if f.object {
			p.startValue(c, f.path+"/"+jsonpointer.Escape(f.key), p.memberSchemas(f, f.key))
			f.expect = expectCommaOrClose
			return
		}
		p.startElement(f, c)
	case expectKey:
		if c != '"' {
			p.syntax("invalid character %q looking for an object key", c)
			return
		}
		p.startKey(f)
	case expectColon:
		if c != ':' {
			p.syntax("invalid character %q after an object key", c)
			return
		}
		f.expect = expectValue
	case expectCommaOrClose:
		switch {
		case c == ',' && f.object:
			f.expect = expectKey
		case c == ',':
			f.expect = expectValue
		case c == '}' && f.object, c == ']' && !f.object:
			p.closeFrame()
		default:
			p.syntax("invalid character %q after a value", c)
		}
	}
}

func (p *prefixChecker) startKey(f *frame) {
	p.scalar = scalarState{kind: '"', raw: append(p.scalar.raw[:0], '"'), key: true}
	f.expect = expectColon
}

// startElement starts an array's next element, checking maxItems.
func (p *prefixChecker) startElement(f *frame, c byte) {
	i := f.n
	f.n++
	path := f.path + "/" + strconv.Itoa(i)
	for _, s := range f.schemas {
		if s.MaxItems >= 0 && f.n > s.MaxItems {
			p.diags = []Diagnostic{{Path: f.path, Message: fmt.Sprintf("maximum %d items required, but found more", s.MaxItems)}}
			return
		}
	}
	f.expect = expectCommaOrClose
	p.startValue(c, path, p.itemSchemas(f, i))
}

// startValue starts a value whose first byte is c, at path, checking its
// type against schemas.
func (p *prefixChecker) startValue(c byte, path string, schemas []*jsonschema.Schema) {
	var kind string
	switch {
	case c == '{':
		kind = "object"
	case c == '[':
		kind = "array"
	case c == '"':
		kind = "string"
	case c == 't' || c == 'f':
		kind = "boolean"
	case c == 'n':
		kind = "null"
	case c == '-' || c >= '0' && c <= '9':
		kind = "number"
	default:
		p.syntax("invalid character %q looking for a value", c)
		return
	}
	for _, s := range schemas {
		if msg := kindRefused(s, kind); msg != "" {
			p.diags = []Diagnostic{{Path: path, Message: msg}}
			return
		}
	}
	switch kind {
	case "object", "array":
		f := &frame{object: kind == "object", path: path, schemas: schemas}
		if f.object {
			f.obj = map[string]any{}
		} else {
			f.arr = []any{}
		}
		p.stack = append(p.stack, f)
	case "string":
		p.scalar = scalarState{kind: '"', raw: append(p.scalar.raw[:0], c), schemas: schemas, path: path}
	case "number":
		p.scalar = scalarState{kind: 'n', raw: append(p.scalar.raw[:0], c), schemas: schemas, path: path}
	default:
		lit := "null"
		switch c {
		case 't':
			lit = "true"
		case 'f':
			lit = "false"
		}
		p.scalar = scalarState{kind: 'l', raw: append(p.scalar.raw[:0], c), literal: lit, schemas: schemas, path: path}
	}
}

// kindRefused says why a value of kind cannot match s ("" when it can): the
// schema is false, its type excludes the kind, or none of its enum or const
// values is of the kind.
func kindRefused(s *jsonschema.Schema, kind string) string {
	if s.Always != nil && !*s.Always {
		return "not allowed"
	}
	if len(s.Types) > 0 {
		ok := false
		for _, t := range s.Types {
			if t == kind || kind == "number" && t == "integer" {
				ok = true
			}
		}
		if !ok {
			return fmt.Sprintf("expected %s, but got %s", strings.Join(s.Types, " or "), kind)
		}
	}
	values := s.Enum
	if len(s.Constant) > 0 {
		values = s.Constant
	}
	if len(values) > 0 {
		for _, v := range values {
			if jsonKind(v) == kind {
				return ""
			}
		}
		return fmt.Sprintf("no allowed value is a %s", kind)
	}
	return ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}

// scalarByte reads one byte of the scalar in progress. It returns true when
// the scalar ended before c (a number's delimiter), so that the caller reads
// c in the enclosing container.
func (p *prefixChecker) scalarByte(c byte) bool {
	s := &p.scalar
	switch s.kind {
	case '"':
		s.raw = append(s.raw, c)
		switch {
		case s.escape == -1:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.escape = 0
			case 'u':
				s.escape = 4
			default:
				p.syntax("invalid escape %q in a string", "\\"+string(c))
			}
		case s.escape > 0:
			if !isHex(c) {
				p.syntax("invalid character %q in a \\u escape", c)
				return false
			}
			s.escape--
		case c == '\\':
			s.escape = -1
		case c < 0x20:
			p.syntax("invalid control character %q in a string", c)
		case c == '"':
			p.endScalar()
		}
		return false
	case 'n':
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.raw = append(s.raw, c)
			if !numberPrefix(s.raw) {
				p.syntax("invalid character %q in a number", c)
			}
			return false
		}
		p.endScalar()
		return true
	default: // literal
		s.raw = append(s.raw, c)
		if !strings.HasPrefix(s.literal, string(s.raw)) {
			p.syntax("invalid character %q in literal %s", c, s.literal)
			return false
		}
		if len(s.raw) == len(s.literal) {
			p.endScalar()
		}
		return false
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// numberPrefix reports whether b is a prefix of a JSON number.
func numberPrefix(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i == len(b) {
		return true
	}
	switch {
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		i = skipDigits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		var ok bool
		if i, ok = digitsAfter(b, i+1); !ok {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digitsAfter(b, i); !ok {
			return false
		}
	}
	return i == len(b)
}

// digitsAfter reads the digits a fraction or an exponent needs from b[i]:
// at least one, unless b ends at i (a prefix may stop there).
func digitsAfter(b []byte, i int) (int, bool) {
	if i == len(b) {
		return i, true
	}
	if !isDigit(b[i]) {
		return i, false
	}
	return skipDigits(b, i), true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// endScalar completes the scalar in progress: a key names the next member
// (checked against additionalProperties: false); a value is checked against
// its subschemas and stored in its container.
func (p *prefixChecker) endScalar() {
	s := &p.scalar
	kind := s.kind
	s.kind = 0
	v, err := scalarValue(kind, s.raw, s.literal)
	if err != nil {
		p.syntax("%s", err)
		return
	}
	if kind == '"' && s.key {
		f := p.stack[len(p.stack)-1]
		f.key = v.(string)
		f.n++
		folded := jsonwalk.FoldKey(f.key)
		if _, twice := f.keys[folded]; twice {
			p.diags = []Diagnostic{{Message: "not valid JSON: " + resultjson.RepeatedKeyProblem(strconv.Quote(f.path+"/"+jsonpointer.Escape(f.key)))}}
			return
		}
		if f.keys == nil {
			f.keys = map[string]struct{}{}
		}
		f.keys[folded] = struct{}{}
		for _, sch := range f.schemas {
			if sch.MaxProperties >= 0 && f.n > sch.MaxProperties {
				p.diags = []Diagnostic{{Path: f.path, Message: fmt.Sprintf("maximum %d properties allowed, but found more", sch.MaxProperties)}}
				return
			}
			if !propertyAllowed(sch, f.key) {
				p.diags = []Diagnostic{{Path: f.path, Message: fmt.Sprintf("additionalProperties '%s' not allowed", f.key)}}
				return
			}
		}
		return
	}
	p.completeValue(v, s.path, s.schemas, 1, 0)
}

// scalarValue decodes a complete scalar as encoding/json does with
// UseNumber.
func scalarValue(kind byte, raw []byte, literal string) (any, error) {
	switch kind {
	case 'n':
		if !numberPrefix(raw) || !isDigit(raw[len(raw)-1]) {
			return nil, fmt.Errorf("incomplete number %q", raw)
		}
		return json.Number(raw), nil
	case 'l':
		switch literal {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, nil
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return str, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// closeFrame completes the object or array on top of the stack.
func (p *prefixChecker) closeFrame() {
	f := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	var v any = f.arr
	if f.object {
		v = f.obj
	}
	p.completeValue(v, f.path, f.schemas, 1+f.size, 1+f.height)
}

// completeValue checks a complete value of size values (itself and those
// inside it) and of the given height against its subschemas, then stores it
// in its container, or as the root value. A container inside the root is
// not checked when that would take the checks past their bound
// (workFactor); the root always is.
func (p *prefixChecker) completeValue(v any, path string, schemas []*jsonschema.Schema, size, height int) {
	p.values++
	if height > 0 && len(p.stack) > 0 {
		if cost := size * height; p.work+cost > workFactor*p.values {
			schemas = nil
		} else {
			p.work += cost
		}
	}
	for _, s := range schemas {
		if diags := validate(s, v); len(diags) > 0 {
			for i := range diags {
				diags[i].Path = path + diags[i].Path
			}
			p.diags = diags
			return
		}
	}
	if len(p.stack) == 0 {
		p.value = v
		p.phase = phaseTrail
		return
	}
	f := p.stack[len(p.stack)-1]
	f.size += size
	f.height = max(f.height, height)
	if f.object {
		f.obj[f.key] = v
	} else {
		f.arr = append(f.arr, v)
	}
}

// propertyAllowed reports whether s lets an object have a member named key:
// false only when additionalProperties is false and neither properties nor
// patternProperties names it.
func propertyAllowed(s *jsonschema.Schema, key string) bool {
	if b, ok := s.AdditionalProperties.(bool); !ok || b {
		return true
	}
	if _, ok := s.Properties[key]; ok {
		return true
	}
	for re := range s.PatternProperties {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}

// memberSchemas returns the subschemas that apply to the member key of f:
// properties, the matching patternProperties, else additionalProperties.
func (p *prefixChecker) memberSchemas(f *frame, key string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range f.schemas {
		matched := false
		if c, ok := s.Properties[key]; ok {
			out = append(out, c)
			matched = true
		}
		for re, c := range s.PatternProperties {
			if re.MatchString(key) {
				out = append(out, c)
				matched = true
			}
		}
		if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !matched {
			out = append(out, a)
		}
	}
	return p.expand(out)
}

// itemSchemas returns the subschemas that apply to element i of f:
// prefixItems and items (2020-12), or items and additionalItems (earlier
// drafts).
func (p *prefixChecker) itemSchemas(f *frame, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range f.schemas {
		switch {
		case i < len(s.PrefixItems):
			out = append(out, s.PrefixItems[i])
		case s.Items2020 != nil:
			out = append(out, s.Items2020)
		}
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, it)
		case []*jsonschema.Schema:
			if i < len(it) {
				out = append(out, it[i])
			} else if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, a)
			}
		}
	}
	return p.expand(out)
}

// expand adds the schemas that apply to the same value as each of schemas
// unconditionally: their $ref targets and allOf members, transitively.
// Subschemas under anyOf, oneOf, not and if are not followed: what they
// require is checked when the value that holds them completes.
func (p *prefixChecker) expand(schemas []*jsonschema.Schema) []*jsonschema.Schema {
	seen := make(map[*jsonschema.Schema]bool, len(schemas))
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		add(s.Ref)
		for _, a := range s.AllOf {
			add(a)
		}
	}
	for _, s := range schemas {
		add(s)
	}
	return out
}

// stream is WrapChat with partial: each delta's text is fed to a
// prefixChecker and the delta is forwarded once the checker accepts it. A
// delta that makes the prefix invalid is not forwarded: the model's stream is
// stopped and the call fails (enforce) or is annotated invalid while the rest
// streams through (annotate). Once a delta carries a tool call, or text
// marked a refusal, the response is not the final output and the rest
// streams unchecked; a turn that ends paused (runtime.FinishPauseTurn) is
// not checked whole at its end nor annotated.
func (c *Coerce) stream(ctx context.Context, call *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool) error {
	chk := &prefixChecker{root: c.schema}
	var text strings.Builder
	start, sent := call.Deltas, 0
	// unchecked: a tool call or a refusal began, and the rest streams
	// unchecked.
	unchecked, refused, consumerStopped := false, false, false
	err := next(ctx, call, func(d runtime.Delta) bool {
		text.WriteString(d.Text)
		unchecked = unchecked || len(d.ToolCalls) > 0 || d.Refusal && d.Text != ""
		if !unchecked && !chk.failed() && !chk.write(d.Text) && c.Mode == ModeEnforce {
			refused = true
			return false
		}
		sent++
		if !yield(d) {
			consumerStopped = true
			return false
		}
		return true
	})
	call.Deltas = start + sent
	if refused {
		// The layer stopped the model, not the consumer; whatever the
		// stream did after the refusal, the refusal is the outcome.
		call.Stopped = false
		return newCoercionError(c.name, text.String(), chk.diags)
	}
	if err != nil || consumerStopped || unchecked || call.FinishReason == runtime.FinishPauseTurn {
		return err
	}
	chk.finish()
	if c.Mode == ModeAnnotate {
		call.Annotate(c.name, Annotation{Valid: !chk.failed(), Value: chk.value, Diagnostics: chk.diags})
		return nil
	}
	if chk.failed() {
		return newCoercionError(c.name, text.String(), chk.diags)
	}
	return nil
}
