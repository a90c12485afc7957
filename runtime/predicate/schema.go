package predicate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
)

// schemaKind is the CEL-relevant shape of a JSON Schema node.
type schemaKind int

const (
	kindDyn schemaKind = iota
	kindString
	kindInt
	kindDouble
	kindBool
	kindObject // closed object type with declared properties
	kindMap    // free-form object: map(string, values)
	kindList
)

// maxSchemaDepth bounds the nesting of schemas turned into types; deeper nodes are dyn.
const maxSchemaDepth = 16

// schemaNode is the part of a JSON Schema that types a CEL value.
type schemaNode struct {
	kind     schemaKind
	props    map[string]*schemaNode // kindObject
	required map[string]bool        // kindObject
	elem     *schemaNode            // kindList items, kindMap values
	bound    int64                  // declared maxLength / maxItems / maxProperties; -1 when none
	nullable bool                   // "type" lists "null": a null reads as absent
}

var dynNode = &schemaNode{kind: kindDyn, bound: -1}

// rawSchema is the subset of draft 2020-12 keywords the type derivation reads.
type rawSchema struct {
	Type                 json.RawMessage            `json:"type"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	Items                json.RawMessage            `json:"items"`
	AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	Enum                 []json.RawMessage          `json:"enum"`
	Const                json.RawMessage            `json:"const"`
	MaxLength            *float64                   `json:"maxLength"`
	MaxItems             *float64                   `json:"maxItems"`
	MaxProperties        *float64                   `json:"maxProperties"`
}

// parseArgsSchema derives the schema node of a tool's args. typed is false when the schema types
// nothing: its root is not an object with declared properties (or additionalProperties: false).
func parseArgsSchema(raw json.RawMessage) (node *schemaNode, typed bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false, nil
	}
	n, err := parseSchemaNode(raw, 0, "")
	if err != nil {
		return nil, false, err
	}
	if n.kind != kindObject {
		return nil, false, nil
	}
	return n, true, nil
}

// parseSchemaNode derives the schema node of raw, a whole schema document
// (the root its local references start from).
func parseSchemaNode(raw json.RawMessage, depth int, path string) (*schemaNode, error) {
	p := &schemaParser{root: raw, budget: maxRefNodes}
	return p.node(raw, depth, path)
}

// maxRefNodes bounds the nodes derived through references in one schema: a
// definition referenced from many places is derived at each, and nested
// definitions so multiply; past the bound a reference types nothing (dyn).
const maxRefNodes = 10000

// schemaParser derives schema nodes within one schema document.
type schemaParser struct {
	root json.RawMessage
	// refs is how many references are being followed; budget the nodes
	// they may still derive.
	refs   int
	budget int
}

// refKeywords are the keywords that type a node by themselves: a node with
// a $ref and none of them is typed as the schema it references.
var refKeywords = []string{"type", "properties", "items", "additionalProperties", "enum", "const"}

// resolve returns the schema a local reference ("#", "#/$defs/addr")
// points to within the document; ok is false for any other reference (an
// anchor, another document) or a pointer to nothing.
func (p *schemaParser) resolve(ref string) (json.RawMessage, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return nil, false
	}
	cur := p.root
	if frag == "" {
		return cur, true
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		cur = bytes.TrimSpace(cur)
		switch {
		case len(cur) > 0 && cur[0] == '{':
			var m map[string]json.RawMessage
			if json.Unmarshal(cur, &m) != nil {
				return nil, false
			}
			if cur, ok = m[tok]; !ok {
				return nil, false
			}
		case len(cur) > 0 && cur[0] == '[':
			var l []json.RawMessage
			i, err := strconv.Atoi(tok)
			if json.Unmarshal(cur, &l) != nil || err != nil || i < 0 || i >= len(l) {
				return nil, false
			}
			cur = l[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// ref types a node that holds a $ref and no keyword that types it by
// itself as the schema the reference points to: dyn when it is not a local
// reference, or when following it would go past the depth or the budget.
func (p *schemaParser) ref(raw json.RawMessage, depth int, path string) (n *schemaNode, followed bool, err error) {
	var s map[string]json.RawMessage
	if json.Unmarshal(raw, &s) != nil || s["$ref"] == nil {
		return nil, false, nil
	}
	for _, k := range refKeywords {
		if _, ok := s[k]; ok {
			return nil, false, nil
		}
	}
	var ref string
	target, ok := json.RawMessage(nil), false
	if json.Unmarshal(s["$ref"], &ref) == nil {
		target, ok = p.resolve(ref)
	}
	if !ok || p.budget <= 0 {
		return dynNode, true, nil
	}
	p.refs++
	defer func() { p.refs-- }()
	n, err = p.node(target, depth+1, path)
	return n, true, err
}

func (p *schemaParser) node(raw json.RawMessage, depth int, path string) (*schemaNode, error) {
	if p.refs > 0 {
		if p.budget--; p.budget < 0 {
			return dynNode, nil
		}
	}
	raw = bytes.TrimSpace(raw)
	if depth > maxSchemaDepth || len(raw) == 0 || raw[0] != '{' {
		// true, false, absent or too deep: accepts anything.
		if len(raw) > 0 && raw[0] != '{' && raw[0] != 't' && raw[0] != 'f' && depth <= maxSchemaDepth {
			return nil, fmt.Errorf("schema%s: want an object or a boolean", pathSuffix(path))
		}
		return dynNode, nil
	}
	if n, followed, err := p.ref(raw, depth, path); followed {
		return n, err
	}
	var s rawSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("schema%s: %w", pathSuffix(path), err)
	}
	typ, nullable, err := schemaType(s.Type)
	if err != nil {
		return nil, fmt.Errorf("schema%s: %w", pathSuffix(path), err)
	}
	if typ == "" {
		switch {
		case s.Properties != nil:
			typ = "object"
		case len(s.Enum) > 0 || len(s.Const) > 0:
			if bound, ok := stringValuesBound(s.Enum, s.Const); ok {
				return &schemaNode{kind: kindString, bound: bound}, nil
			}
		}
	}
	n, err := p.nodeOf(typ, &s, depth, path)
	if err != nil || n == dynNode || !nullable {
		return n, err
	}
	c := *n
	c.nullable = true
	return &c, nil
}

func (p *schemaParser) nodeOf(typ string, s *rawSchema, depth int, path string) (*schemaNode, error) {
	var err error
	switch typ {
	case "string":
		n := &schemaNode{kind: kindString, bound: -1}
		if bound, ok := stringValuesBound(s.Enum, s.Const); ok {
			n.bound = bound
		}
		if b := sizeKeyword(s.MaxLength); b >= 0 && (n.bound < 0 || b < n.bound) {
			n.bound = b
		}
		return n, nil
	case "integer":
		return &schemaNode{kind: kindInt, bound: -1}, nil
	case "number":
		return &schemaNode{kind: kindDouble, bound: -1}, nil
	case "boolean":
		return &schemaNode{kind: kindBool, bound: -1}, nil
	case "array":
		elem := dynNode
		if len(s.Items) > 0 {
			if elem, err = p.node(s.Items, depth+1, path+"[]"); err != nil {
				return nil, err
			}
		}
		return &schemaNode{kind: kindList, elem: elem, bound: sizeKeyword(s.MaxItems)}, nil
	case "object":
		closed := bytes.Equal(bytes.TrimSpace(s.AdditionalProperties), []byte("false"))
		if len(s.Properties) == 0 && !closed {
			// A free-form object: a map whose values follow additionalProperties.
			elem := dynNode
			if len(s.AdditionalProperties) > 0 {
				if elem, err = p.node(s.AdditionalProperties, depth+1, path+".*"); err != nil {
					return nil, err
				}
			}
			return &schemaNode{kind: kindMap, elem: elem, bound: sizeKeyword(s.MaxProperties)}, nil
		}
		n := &schemaNode{
			kind:     kindObject,
			props:    make(map[string]*schemaNode, len(s.Properties)),
			required: make(map[string]bool, len(s.Required)),
			bound:    -1,
		}
		for name, sub := range s.Properties {
			c, err := p.node(sub, depth+1, path+"."+name)
			if err != nil {
				return nil, err
			}
			n.props[name] = c
		}
		for _, name := range s.Required {
			if p, ok := n.props[name]; ok && !p.nullable {
				n.required[name] = true
			}
		}
		return n, nil
	}
	return dynNode, nil
}

func pathSuffix(path string) string {
	if path == "" {
		return ""
	}
	return " at " + path[1:]
}

// schemaType reads the "type" keyword. A list of types is read as one type when it is that
// type plus "null" (a nullable field; null reads as absent); other lists are "" (dyn).
func schemaType(raw json.RawMessage) (typ string, nullable bool, err error) {
	if len(raw) == 0 {
		return "", false, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return one, false, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return "", false, fmt.Errorf("type: want a string or a list of strings")
	}
	var rest []string
	for _, t := range many {
		if t == "null" {
			nullable = true
			continue
		}
		rest = append(rest, t)
	}
	if len(rest) == 1 {
		return rest[0], nullable, nil
	}
	return "", nullable, nil
}

// stringValuesBound reports the longest value when enum/const hold only strings.
func stringValuesBound(enum []json.RawMessage, konst json.RawMessage) (int64, bool) {
	values := slices.Clone(enum)
	if len(konst) > 0 {
		values = append(values, konst)
	}
	if len(values) == 0 {
		return 0, false
	}
	var bound int64
	for _, v := range values {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, false
		}
		bound = max(bound, int64(utf8.RuneCountInString(s)))
	}
	return bound, true
}

func sizeKeyword(v *float64) int64 {
	if v == nil || *v < 0 || *v > math.MaxInt32 {
		return -1
	}
	return int64(*v)
}

// intersect returns the schema node that both a and b satisfy for CEL typing: the fields both
// declare with the same type (recursively), required only where both require them. It returns
// nil when the kinds differ.
func intersect(a, b *schemaNode) *schemaNode {
	if a.kind != b.kind {
		return nil
	}
	n := &schemaNode{kind: a.kind, bound: -1, nullable: a.nullable || b.nullable}
	if a.bound >= 0 && b.bound >= 0 {
		n.bound = max(a.bound, b.bound)
	}
	switch a.kind {
	case kindObject:
		n.props = map[string]*schemaNode{}
		n.required = map[string]bool{}
		for name, pa := range a.props {
			pb, ok := b.props[name]
			if !ok {
				continue
			}
			if c := intersect(pa, pb); c != nil {
				n.props[name] = c
				n.required[name] = a.required[name] && b.required[name]
			}
		}
	case kindList, kindMap:
		n.elem = intersect(a.elem, b.elem)
		if n.elem == nil {
			return nil
		}
	}
	return n
}

// argsTypes is the result of deriving the args types from a set of schemas.
type argsTypes struct {
	root    *types.Type            // nil when args is untyped
	node    *schemaNode            // the merged schema of root
	objects map[string]*objectType // by type name
}

// argsRootName is the type name of the args root object.
const argsRootName = "agentc.args"

// buildArgsTypes derives the args types from the schemas of the tools a predicate is scoped to.
// Any schema that types nothing makes args untyped.
func buildArgsTypes(schemas []json.RawMessage) (*argsTypes, error) {
	out := &argsTypes{objects: map[string]*objectType{}}
	if len(schemas) == 0 {
		return out, nil
	}
	var merged *schemaNode
	untyped := false
	for i, raw := range schemas {
		n, typed, err := parseArgsSchema(raw)
		if err != nil {
			return nil, fmt.Errorf("args schema %d: %w", i, err)
		}
		if !typed {
			untyped = true
			continue
		}
		if merged == nil {
			merged = n
		} else {
			merged = intersect(merged, n)
		}
	}
	if untyped || merged == nil {
		return out, nil
	}
	out.node = merged
	out.root = out.build(merged, argsRootName)
	return out, nil
}

func (a *argsTypes) build(n *schemaNode, name string) *types.Type {
	switch n.kind {
	case kindString:
		return types.StringType
	case kindInt:
		return types.IntType
	case kindDouble:
		return types.DoubleType
	case kindBool:
		return types.BoolType
	case kindList:
		return types.NewListType(a.build(n.elem, name))
	case kindMap:
		return types.NewMapType(types.StringType, a.build(n.elem, name+".value"))
	case kindObject:
		names := make([]string, 0, len(n.props))
		for p := range n.props {
			names = append(names, p)
		}
		slices.Sort(names)
		fields := make([]*field, 0, len(names))
		for _, p := range names {
			c := n.props[p]
			f := &field{
				name:     p,
				required: n.required[p],
				ft: types.FieldType{
					Type:    a.build(c, name+"."+p),
					GetFrom: argGetter(p, c),
					IsSet:   argIsSet(p),
				},
			}
			if c.bound >= 0 {
				f.declared = &checker.SizeEstimate{Max: uint64(c.bound)}
			}
			switch c.kind {
			case kindString:
				f.assumed = assumedString
			case kindList:
				f.assumed = assumedList
			case kindMap:
				f.assumed = assumedMap
			}
			fields = append(fields, f)
		}
		o := newObjectType(name, true, fields...)
		a.objects[name] = o
		return o.typ
	}
	return types.DynType
}

// argIsSet is the presence test of an args field: the key is present and not null.
func argIsSet(name string) func(any) bool {
	return func(target any) bool {
		m, _ := target.(map[string]any)
		v, ok := m[name]
		return ok && v != nil
	}
}

// argGetter reads one args field from its JSON object and converts it to the field's CEL type:
// integers decoded as float64 or json.Number become int, numbers become double. Conversion
// happens at access, so arguments that a predicate never reads cost nothing.
func argGetter(name string, n *schemaNode) func(any) (any, error) {
	conv := converter(n)
	return func(target any) (any, error) {
		m, ok := target.(map[string]any)
		if !ok && target != nil {
			return nil, fmt.Errorf("args: want a JSON object holding %s, got %T", name, target)
		}
		v, ok := m[name]
		if !ok || v == nil {
			return nil, fmt.Errorf("no such key: %s", name)
		}
		if conv == nil {
			return v, nil
		}
		out, err := conv(v)
		if err != nil {
			return nil, fmt.Errorf("args field %s: %w", name, err)
		}
		return out, nil
	}
}

// converter returns the conversion of a JSON value to the CEL type of n, or nil when the value
// can be handed to the adapter as it is.
func converter(n *schemaNode) func(any) (any, error) {
	switch n.kind {
	case kindInt:
		return toInt
	case kindDouble:
		return toDouble
	case kindString:
		return func(v any) (any, error) {
			if s, ok := v.(string); ok {
				return types.String(s), nil
			}
			return nil, fmt.Errorf("want a string, got %s", jsonKind(v))
		}
	case kindBool:
		return func(v any) (any, error) {
			if b, ok := v.(bool); ok {
				return types.Bool(b), nil
			}
			return nil, fmt.Errorf("want a boolean, got %s", jsonKind(v))
		}
	case kindObject:
		return func(v any) (any, error) {
			if _, ok := v.(map[string]any); ok {
				return v, nil
			}
			return nil, fmt.Errorf("want an object, got %s", jsonKind(v))
		}
	case kindList:
		elem := converter(n.elem)
		if n.elem.kind != kindInt && n.elem.kind != kindDouble && n.elem.kind != kindList {
			elem = nil
		}
		return func(v any) (any, error) {
			l, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("want an array, got %s", jsonKind(v))
			}
			if elem == nil {
				return l, nil
			}
			return convertElems(l, elem)
		}
	case kindMap:
		elem := converter(n.elem)
		if n.elem.kind != kindInt && n.elem.kind != kindDouble && n.elem.kind != kindList {
			elem = nil
		}
		return func(v any) (any, error) {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("want an object, got %s", jsonKind(v))
			}
			if elem == nil {
				return m, nil
			}
			out := make(map[string]any, len(m))
			for k, e := range m {
				c, err := elem(e)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				out[k] = c
			}
			return out, nil
		}
	}
	return nil
}

// convertElems converts the elements of a JSON array, copying it (the caller's value is never
// modified).
func convertElems(l []any, elem func(any) (any, error)) ([]any, error) {
	out := make([]any, len(l))
	for i, e := range l {
		c, err := elem(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func toInt(v any) (any, error) {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return types.Int(int64(x)), nil
		}
		return nil, fmt.Errorf("want an integer, got %v", x)
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return types.Int(i), nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %q", string(x))
		}
		return toInt(f)
	case int:
		return types.Int(x), nil
	case int64:
		return types.Int(x), nil
	case int32:
		return types.Int(x), nil
	case float32:
		return toInt(float64(x))
	case types.Int:
		return x, nil
	}
	return nil, fmt.Errorf("want an integer, got %s", jsonKind(v))
}

func toDouble(v any) (any, error) {
	switch x := v.(type) {
	case float64:
		return types.Double(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %q", string(x))
		}
		return types.Double(f), nil
	case int:
		return types.Double(x), nil
	case int64:
		return types.Double(x), nil
	case int32:
		return types.Double(x), nil
	case float32:
		return types.Double(x), nil
	case types.Double:
		return x, nil
	}
	return nil, fmt.Errorf("want a number, got %s", jsonKind(v))
}

// jsonKind names the JSON kind of a decoded value for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, float32, int, int64, int32, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
