package predicate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/internal/jsonkind"
	"github.com/agentc-dev/agentc/internal/jsonnum"
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
	PrefixItems          json.RawMessage            `json:"prefixItems"`
	Ref                  json.RawMessage            `json:"$ref"`
	AllOf                json.RawMessage            `json:"allOf"`
	AnyOf                json.RawMessage            `json:"anyOf"`
	OneOf                json.RawMessage            `json:"oneOf"`
	Nullable             json.RawMessage            `json:"nullable"`
}

// typesItself reports whether the schema holds a keyword that types it by
// itself, besides $ref, allOf, anyOf and oneOf.
func (s *rawSchema) typesItself() bool {
	return len(s.Type) > 0 || s.Properties != nil || len(s.Items) > 0 || len(s.PrefixItems) > 0 ||
		len(s.AdditionalProperties) > 0 || len(s.Enum) > 0 || len(s.Const) > 0
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

// typingKeywords are the keywords that say something of a value's type;
// a schema with none of them (only a title, a description, a default)
// accepts anything and adds nothing to the schemas it is combined with.
var typingKeywords = []string{"type", "properties", "items", "prefixItems", "additionalProperties",
	"enum", "const", "$ref", "allOf", "anyOf", "oneOf"}

// typing reports whether raw is a schema object holding a typing keyword,
// or anything but an object (a boolean schema, or a malformed one, which
// node reports).
func typing(raw json.RawMessage) bool {
	var s map[string]json.RawMessage
	if json.Unmarshal(raw, &s) != nil {
		return true
	}
	for _, k := range typingKeywords {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// schemaList reads a keyword holding a list of schemas (allOf, anyOf,
// oneOf); ok is false when it holds something else.
func schemaList(raw json.RawMessage) (l []json.RawMessage, ok bool) {
	return l, json.Unmarshal(raw, &l) == nil
}

// ref types a $ref as the schema it points to: dyn when it is not a local
// reference, or when following it would go past the depth or the budget.
func (p *schemaParser) ref(raw json.RawMessage, depth int, path string) (*schemaNode, error) {
	var ref string
	target, ok := json.RawMessage(nil), false
	if json.Unmarshal(raw, &ref) == nil {
		target, ok = p.resolve(ref)
	}
	if !ok || p.budget <= 0 {
		return dynNode, nil
	}
	p.refs++
	defer func() { p.refs-- }()
	return p.node(target, depth+1, path)
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
	var s rawSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("schema%s: %w", pathSuffix(path), err)
	}
	// The node's own keywords, a $ref beside them and each allOf branch
	// all hold of the value (as draft 2020-12 reads a $ref with siblings);
	// anyOf and oneOf hold one of their branches.
	var parts []*schemaNode
	if s.typesItself() {
		n, err := p.own(&s, depth, path)
		if err != nil {
			return nil, err
		}
		parts = append(parts, n)
	}
	if len(s.Ref) > 0 {
		n, err := p.ref(s.Ref, depth, path)
		if err != nil {
			return nil, err
		}
		parts = append(parts, n)
	}
	if len(s.AllOf) > 0 {
		branches, ok := schemaList(s.AllOf)
		if !ok {
			return dynNode, nil
		}
		for _, b := range branches {
			if !typing(b) {
				continue
			}
			n, err := p.node(b, depth+1, path)
			if err != nil {
				return nil, err
			}
			parts = append(parts, n)
		}
	}
	for _, kw := range []json.RawMessage{s.AnyOf, s.OneOf} {
		if len(kw) == 0 {
			continue
		}
		n, err := p.union(kw, depth, path)
		if err != nil {
			return nil, err
		}
		parts = append(parts, n)
	}
	if len(parts) == 0 {
		return dynNode, nil
	}
	n := parts[0]
	for _, o := range parts[1:] {
		n = conjoin(n, o)
	}
	if n != dynNode && !n.nullable && bytes.Equal(bytes.TrimSpace(s.Nullable), []byte("true")) {
		// OpenAPI 3.0 marks a field that may be null with nullable: true.
		c := *n
		c.nullable = true
		n = &c
	}
	return n, nil
}

// union types anyOf or oneOf: the value holds one of the branches. A
// branch that is null makes the result nullable (pydantic writes an
// Optional[str] as anyOf [{type: string}, {type: null}]); the others are
// joined.
func (p *schemaParser) union(raw json.RawMessage, depth int, path string) (*schemaNode, error) {
	branches, ok := schemaList(raw)
	if !ok || len(branches) == 0 {
		return dynNode, nil
	}
	var n *schemaNode
	nullable := false
	for _, b := range branches {
		if isNullSchema(b) {
			nullable = true
			continue
		}
		c, err := p.node(b, depth+1, path)
		if err != nil {
			return nil, err
		}
		if n == nil {
			n = c
		} else {
			n = join(n, c)
		}
	}
	if n == nil || n == dynNode || !nullable || n.nullable {
		if n == nil {
			return dynNode, nil
		}
		return n, nil
	}
	c := *n
	c.nullable = true
	return &c, nil
}

// isNullSchema reports whether raw admits only null: {"type": "null"}, or
// an enum or const of null alone.
func isNullSchema(raw json.RawMessage) bool {
	var s struct {
		Type  *string           `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		Const json.RawMessage   `json:"const"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	null := []byte("null")
	switch {
	case s.Type != nil:
		return *s.Type == "null"
	case len(s.Enum) == 1:
		return bytes.Equal(bytes.TrimSpace(s.Enum[0]), null)
	}
	return bytes.Equal(bytes.TrimSpace(s.Const), null)
}

// own types a node by its own keywords: type, properties, items,
// additionalProperties, enum and const.
func (p *schemaParser) own(s *rawSchema, depth int, path string) (*schemaNode, error) {
	typ, nullable, err := schemaType(s.Type)
	if err != nil {
		return nil, fmt.Errorf("schema%s: %w", pathSuffix(path), err)
	}
	if typ == "" {
		switch {
		case s.Properties != nil:
			typ = "object"
		case len(s.Enum) > 0 || len(s.Const) > 0:
			return valuesNode(s.Enum, s.Const), nil
		}
	}
	n, err := p.nodeOf(typ, s, depth, path)
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
		if len(s.Enum) > 0 || len(s.Const) > 0 {
			// A number that can only be one of some integers (zod writes
			// z.union([z.literal(1), z.literal(2)]) as type number, enum
			// [1, 2]) is an int: guards compare it with 1, not 1.0.
			if v := valuesNode(s.Enum, s.Const); v.kind == kindInt {
				return &schemaNode{kind: kindInt, bound: -1}, nil
			}
		}
		return &schemaNode{kind: kindDouble, bound: -1}, nil
	case "boolean":
		return &schemaNode{kind: kindBool, bound: -1}, nil
	case "array":
		elem := dynNode
		// A tuple (prefixItems, or items as a list in drafts before
		// 2020-12, as zod-to-json-schema writes z.tuple) holds elements
		// of several schemas: its elements are dyn.
		if len(s.PrefixItems) == 0 && len(s.Items) > 0 && bytes.TrimSpace(s.Items)[0] != '[' {
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
		// In the order of the names, not the map's: the reference budget
		// types the properties met first, and what is typed must not vary
		// from one vet of the same policy to the next.
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			sub := s.Properties[name]
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

// valuesNode types an enum or a const without a type by the values it
// lists: strings are a string (bounded by the longest), integers an int,
// numbers a double (pydantic writes an IntEnum as enum [1, 2] and the
// values arrive as JSON numbers), booleans a bool; a null among them makes
// it nullable. Values of several kinds, or objects and arrays, are dyn.
func valuesNode(enum []json.RawMessage, konst json.RawMessage) *schemaNode {
	values := slices.Clone(enum)
	if len(konst) > 0 {
		values = append(values, konst)
	}
	n := &schemaNode{kind: kindDyn, bound: -1}
	for _, v := range values {
		var k schemaKind
		switch x := decodeValue(v).(type) {
		case nil:
			n.nullable = true
			continue
		case string:
			k = kindString
			n.bound = max(n.bound, int64(utf8.RuneCountInString(x)))
		case bool:
			k = kindBool
		case json.Number:
			k = kindDouble
			if _, err := x.Int64(); err == nil {
				k = kindInt
			}
		default:
			return dynNode
		}
		switch {
		case n.kind == kindDyn || n.kind == k:
			n.kind = k
		case n.kind == kindInt && k == kindDouble || n.kind == kindDouble && k == kindInt:
			n.kind = kindDouble
		default:
			return dynNode
		}
	}
	if n.kind == kindDyn {
		return dynNode
	}
	if n.kind != kindString {
		n.bound = -1
	}
	return n
}

// decodeValue decodes one JSON value, numbers as json.Number; an invalid
// value decodes as a struct{} (of no JSON kind).
func decodeValue(raw json.RawMessage) any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return struct{}{}
	}
	return v
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

// conjoin returns the schema node of a value that satisfies both a and b
// (allOf, a $ref with siblings): an object has the fields of both, required
// where either requires them; an integer that is a number is an integer;
// kinds that exclude each other are dyn. A node that types nothing (dyn)
// leaves a scalar as it is, but makes an object, a map or a list dyn: what
// it does not say may declare more fields.
func conjoin(a, b *schemaNode) *schemaNode {
	if a.kind == kindDyn || b.kind == kindDyn {
		if a.kind == kindDyn {
			a, b = b, a
		}
		if a.kind == kindObject || a.kind == kindMap || a.kind == kindList {
			return dynNode
		}
		return a
	}
	if a.kind == kindMap && b.kind == kindObject {
		a, b = b, a
	}
	if a.kind == kindObject && b.kind == kindMap && b.elem == dynNode {
		// type: object beside the properties an allOf branch declares.
		b = a
	}
	if a.kind != b.kind {
		if a.kind == kindInt && b.kind == kindDouble || a.kind == kindDouble && b.kind == kindInt {
			return &schemaNode{kind: kindInt, bound: -1, nullable: a.nullable && b.nullable}
		}
		return dynNode
	}
	n := &schemaNode{kind: a.kind, bound: a.bound, nullable: a.nullable && b.nullable}
	if n.bound < 0 || b.bound >= 0 && b.bound < n.bound {
		n.bound = b.bound
	}
	switch a.kind {
	case kindObject:
		n.props = mergeProps(a.props, b.props, conjoin)
		n.required = map[string]bool{}
		for name, p := range n.props {
			n.required[name] = (a.required[name] || b.required[name]) && !p.nullable
		}
	case kindList, kindMap:
		n.elem = conjoin(a.elem, b.elem)
	}
	return n
}

// join returns the schema node of a value that satisfies a or b (anyOf,
// oneOf): an object has the fields of either (so a typo in any of them is
// caught), each typed where both agree on its type and dyn where they do
// not, and required only where both require it: a field one branch lacks
// must be tested with has(). Kinds that differ are dyn.
func join(a, b *schemaNode) *schemaNode {
	if a.kind == kindDyn || b.kind == kindDyn || a.kind != b.kind {
		return dynNode
	}
	n := &schemaNode{kind: a.kind, bound: max(a.bound, b.bound), nullable: a.nullable || b.nullable}
	if a.bound < 0 || b.bound < 0 {
		n.bound = -1
	}
	switch a.kind {
	case kindObject:
		n.props = mergeProps(a.props, b.props, join)
		n.required = map[string]bool{}
		for name, p := range n.props {
			n.required[name] = a.required[name] && b.required[name] && !p.nullable
		}
	case kindList, kindMap:
		n.elem = join(a.elem, b.elem)
	}
	return n
}

// mergeProps returns the fields of a and b, a field both declare combined
// by both.
func mergeProps(a, b map[string]*schemaNode, both func(a, b *schemaNode) *schemaNode) map[string]*schemaNode {
	out := maps.Clone(a)
	if out == nil {
		out = make(map[string]*schemaNode, len(b))
	}
	for name, pb := range b {
		if pa, ok := out[name]; ok {
			out[name] = both(pa, pb)
		} else {
			out[name] = pb
		}
	}
	return out
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
		return types.NewListType(a.buildElem(n.elem, name))
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

// buildElem types the elements of a list. A scalar the schema lets be null
// is dyn there: an element cannot be absent, so l[0] == null is how a guard
// reads it. (A map's values are typed as they are: a null value reads as
// absent, tested with m[?'k'] or has(m.k).)
func (a *argsTypes) buildElem(n *schemaNode, name string) *types.Type {
	if n.nullable && n.kind != kindObject && n.kind != kindList && n.kind != kindMap {
		return types.DynType
	}
	return a.build(n, name)
}

// argIsSet is the presence test of an args field: the key is present and not null.
func argIsSet(name string) func(any) bool {
	return func(target any) bool {
		m, _ := asObject(target)
		return m[name] != nil
	}
}

// argGetter reads one args field from its JSON object and converts it to the field's CEL type:
// integers decoded as float64 or json.Number become int, numbers become double, objects and maps
// are jsonObjects (a null member reads as absent). Conversion happens at access, so arguments
// that a predicate never reads cost nothing.
func argGetter(name string, n *schemaNode) func(any) (any, error) {
	conv := converter(n)
	return func(target any) (any, error) {
		m, ok := asObject(target)
		if !ok && target != nil {
			return nil, fmt.Errorf("args: want a JSON object holding %s, got %T", name, target)
		}
		v, ok := m[name]
		if !ok || v == nil {
			return nil, fmt.Errorf("no such key: %s", name)
		}
		if conv == nil {
			return jsonValue(v), nil
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
			return nil, fmt.Errorf("want a string, got %s", jsonkind.Of(v))
		}
	case kindBool:
		return func(v any) (any, error) {
			if b, ok := v.(bool); ok {
				return types.Bool(b), nil
			}
			return nil, fmt.Errorf("want a boolean, got %s", jsonkind.Of(v))
		}
	case kindObject:
		return func(v any) (any, error) {
			if m, ok := v.(map[string]any); ok {
				return jsonObject(m), nil
			}
			return nil, fmt.Errorf("want an object, got %s", jsonkind.Of(v))
		}
	case kindList:
		elem := elemConverter(n.elem)
		// A list whose elements may be objects is handed over as a CEL list, whose elements the
		// adapter makes jsonObjects; a list of scalars as it is, so indexing it allocates nothing.
		scalars := n.elem.kind == kindString || n.elem.kind == kindInt || n.elem.kind == kindDouble || n.elem.kind == kindBool
		return func(v any) (any, error) {
			l, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("want an array, got %s", jsonkind.Of(v))
			}
			if elem != nil {
				c, err := convertElems(l, elem)
				if err != nil {
					return nil, err
				}
				l = c
			}
			if scalars {
				return l, nil
			}
			return types.NewDynamicList(typeAdapter, l), nil
		}
	case kindMap:
		elem := elemConverter(n.elem)
		return func(v any) (any, error) {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("want an object, got %s", jsonkind.Of(v))
			}
			if elem == nil {
				return jsonObject(m), nil
			}
			out := make(map[string]any, len(m))
			for k, e := range m {
				if e == nil {
					continue // a null reads as absent
				}
				c, err := elem(e)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				out[k] = c
			}
			return jsonObject(out), nil
		}
	}
	return nil
}

// elemConverter returns the conversion of the elements of a list or the
// values of a map, or nil when they can be handed over as they are. A null
// where the schema allows one stays null.
func elemConverter(n *schemaNode) func(any) (any, error) {
	conv := converter(n)
	if n.kind != kindInt && n.kind != kindDouble && n.kind != kindList || conv == nil {
		return nil
	}
	if !n.nullable {
		return conv
	}
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		return conv(v)
	}
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
		f, ok := jsonnum.ExactFloat(x)
		if !ok {
			// 9007199254740993.0 would be read as 9007199254740992.
			return nil, fmt.Errorf("want an integer, got %s, which is not held exactly", clipNumber(x))
		}
		return toInt(f)
	case int:
		return types.Int(x), nil
	case int64:
		return types.Int(x), nil
	case int32:
		return types.Int(x), nil
	case uint:
		return uintToInt(uint64(x))
	case uint64:
		return uintToInt(x)
	case uint32:
		return types.Int(x), nil
	case float32:
		return toInt(float64(x))
	case types.Int:
		return x, nil
	}
	return nil, fmt.Errorf("want an integer, got %s", jsonkind.Of(v))
}

func toDouble(v any) (any, error) {
	switch x := v.(type) {
	case float64:
		return types.Double(x), nil
	case json.Number:
		f, ok := jsonnum.ExactFloat(x)
		if !ok {
			return nil, fmt.Errorf("want a number a double holds exactly, got %s", clipNumber(x))
		}
		return types.Double(f), nil
	case int:
		return intToDouble(int64(x))
	case int64:
		return intToDouble(x)
	case int32:
		return types.Double(x), nil
	case uint:
		return uintToDouble(uint64(x))
	case uint64:
		return uintToDouble(x)
	case uint32:
		return types.Double(x), nil
	case float32:
		return types.Double(x), nil
	case types.Double:
		return x, nil
	}
	return nil, fmt.Errorf("want a number, got %s", jsonkind.Of(v))
}

// intToDouble converts an integer to a double, or fails when a double does
// not hold it exactly (9007199254740993 would be read as
// 9007199254740992).
func intToDouble(i int64) (any, error) {
	f := float64(i)
	if f < 1<<63 && int64(f) == i {
		return types.Double(f), nil
	}
	return nil, fmt.Errorf("want a number a double holds exactly, got the integer %d", i)
}

// uintToInt converts an unsigned integer to an int, or fails when an int
// does not hold it (above the largest int64, which would wrap around to a
// negative number).
func uintToInt(u uint64) (any, error) {
	if u > math.MaxInt64 {
		return nil, fmt.Errorf("want an integer, got %d, which an int does not hold", u)
	}
	return types.Int(int64(u)), nil
}

// uintToDouble converts an unsigned integer to a double, or fails when a
// double does not hold it exactly.
func uintToDouble(u uint64) (any, error) {
	f := float64(u)
	if f < 1<<64 && uint64(f) == u {
		return types.Double(f), nil
	}
	return nil, fmt.Errorf("want a number a double holds exactly, got the integer %d", u)
}

// clipNumber returns the text of n, shortened when long.
func clipNumber(n json.Number) string {
	if len(n) > 40 {
		return string(n[:40]) + "..."
	}
	return string(n)
}
