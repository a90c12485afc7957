package dsl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/internal/textdist"
)

// checkArgsSchema compiles a tool's argument schema as JSON Schema (draft
// 2020-12 unless it names another with $schema) and reports each keyword
// that is not valid JSON Schema at the keyword, as schema/invalid-value. A
// schema read from a file is reported at the file's name, with the
// keyword's JSON pointer.
func (l *loader) checkArgsSchema(t *Tool, fromFile bool) {
	l.checkToolSchema(t.Name, "args", t.Args, t.ArgsPos, fromFile)
	var doc any
	if json.Unmarshal(t.Args, &doc) == nil {
		l.checkCaseCollisions([]string{"tools", t.Name, "args"}, doc, t.ArgsPos, fromFile)
	}
}

// checkToolSchema checks the JSON Schema raw of the tool's field (args,
// result_schema) as checkArgsSchema describes.
func (l *loader) checkToolSchema(tool, field string, raw []byte, at Pos, fromFile bool) {
	l.checkSchema([]string{"tools", tool, field}, raw, at, fromFile)
}

// checkSchema checks the JSON Schema raw written at path (tools.x.args,
// state.fields.x.schema, an output_coerce entry's schema) as
// checkArgsSchema describes.
func (l *loader) checkSchema(path []string, raw []byte, at Pos, fromFile bool) {
	if len(raw) == 0 {
		return
	}
	name, field := fieldName(path), path[len(path)-1]
	c := jsonschema.NewCompiler()
	url := "agentc:///" + field + ".json"
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		l.errorf(at, "schema/invalid-value", "%s: not a JSON Schema: %v", name, err)
		return
	}
	_, err := c.Compile(url)
	if err == nil {
		var doc any
		if json.Unmarshal(raw, &doc) == nil {
			l.checkRequired(path, doc, nil, at, fromFile)
			l.checkKeywords(path, doc, nil, at, fromFile)
		}
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		msg := strings.ReplaceAll(err.Error(), url, field)
		l.errorf(at, "schema/invalid-value", "%s: %s", name, strings.TrimPrefix(msg, "jsonschema: "))
		return
	}
	// A misspelt keyword is no fault of the metaschema's: reported in the
	// same round as the faults.
	var doc any
	if json.Unmarshal(raw, &doc) == nil {
		l.checkKeywords(path, doc, nil, at, fromFile)
	}
	for _, f := range schemaFaults(ve) {
		where := append(slices.Clone(path), jsonpointer.Tokens(f.at)...)
		l.schemaReport(Error, where, l.userPos(where), at, fromFile, "schema/invalid-value", "%s: not valid JSON Schema: %s%s", fieldName(where), f.msg, suggestKeywordValue(raw, f))
	}
}

// typeAliases are the names programming languages give JSON Schema's
// types, which no spelling mistake explains ("int" for "integer").
var typeAliases = map[string]string{
	"int": "integer", "float": "number", "double": "number", "decimal": "number",
	"bool": "boolean", "str": "string", "text": "string",
	"list": "array", "dict": "object", "map": "object",
}

// suggestKeywordValue returns "; did you mean X?" for a value the
// metaschema refuses as none of an enumeration ("nubmer" for a type): the
// closest of the values it allows, or the type other languages name so.
func suggestKeywordValue(raw []byte, f schemaFault) string {
	allowed, ok := strings.CutPrefix(f.msg, "value must be one of ")
	if !ok {
		return ""
	}
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	for _, tok := range jsonpointer.Tokens(f.at) {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return ""
			}
			doc = v[i]
		default:
			return ""
		}
	}
	got, ok := doc.(string)
	if !ok {
		return ""
	}
	var values []string
	for _, q := range strings.Split(allowed, ", ") {
		if v, err := strconv.Unquote(q); err == nil {
			values = append(values, v)
		}
	}
	if t, ok := typeAliases[strings.ToLower(got)]; ok && slices.Contains(values, t) {
		return fmt.Sprintf("; did you mean %q?", t)
	}
	return suggestName(got, values)
}

// formats are the formats JSON Schema (2020-12) and OpenAPI define.
var formats = []string{"date-time", "date", "time", "duration", "email", "idn-email", "hostname",
	"idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid",
	"uri-template", "json-pointer", "relative-json-pointer", "regex",
	"int32", "int64", "float", "double", "byte", "binary", "password"}

// checkFormat warns at a format that JSON Schema does not define but that
// lies close to one that it does ("urii", "date_time"): a format of one's own is
// allowed, and ignored by every validator, so a misspelt one is silently
// no format at all.
func (l *loader) checkFormat(where []string, m map[string]any, at Pos, fromFile bool) {
	f, ok := m["format"].(string)
	if !ok || slices.Contains(formats, f) {
		return
	}
	best := textdist.Closest(f, formats)
	if best == "" {
		return
	}
	l.schemaReport(Warning, where, l.userPos(where), at, fromFile, "schema/invalid-value", "%s: %q is not a format JSON Schema defines, so no validator knows it; did you mean %q?", fieldName(where), f, best)
}

// schemaKeywords are the keywords of JSON Schema (2020-12 and the drafts
// before it, and OpenAPI's), whose values are schemas, maps of schemas or
// lists of schemas, or neither.
var (
	subschemaKeywords = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema"}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	assertionKeywords  = []string{"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum",
		"minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
		"uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
		"dependentRequired", "dependencies", "$ref", "$dynamicRef"}
	otherKeywords = []string{"$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment",
		"$recursiveRef", "$recursiveAnchor", "format", "title", "description", "default", "deprecated",
		"readOnly", "writeOnly", "examples", "example", "contentEncoding", "contentMediaType", "nullable",
		"discriminator", "xml", "externalDocs"}
)

// checkKeywords reports a key of a schema object that is no JSON Schema
// keyword but lies close to one that validates ("maxLenght", "additionalProperty",
// "requried"): validators ignore an unknown keyword, so the check it was
// meant to make is silently not made and arguments pass unchecked. Keys
// close to no such keyword (annotations of one's own, "x-unit") are left
// alone. sub is the location of schema within the field.
func (l *loader) checkKeywords(path []string, schema any, sub []string, at Pos, fromFile bool) {
	validating := slices.Concat(subschemaKeywords, schemaMapKeywords, schemaListKeywords, assertionKeywords)
	known := slices.Concat(validating, otherKeywords)
	eachSchema(schema, sub, func(m map[string]any, sub []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if slices.Contains(known, k) {
				continue
			}
			where := slices.Concat(path, sub, []string{k})
			pos := l.schemaPos(where, at)
			if best := textdist.Closest(k, known); best != "" && slices.Contains(validating, best) {
				l.schemaReport(Error, where, pos, at, fromFile, "schema/invalid-value", "%s: %q is not a JSON Schema keyword, so validators ignore it and the check it names is not made; did you mean %q?",
					fieldName(where), k, best)
			} else if v, ok := m[k].(map[string]any); ok && isSchemaLike(v) {
				l.schemaReport(Error, where, pos, at, fromFile, "schema/invalid-value", "%s: %q is not a JSON Schema keyword, so validators ignore it, with the schema it holds; a property is described under properties: write properties: %s: {...}",
					fieldName(where), k, k)
			}
		}
		l.checkFormat(slices.Concat(path, sub, []string{"format"}), m, at, fromFile)
	})
}

// schemaPos returns the position of the key at where, a path into a
// schema written in CUE (its label).
func (l *loader) schemaPos(where []string, at Pos) Pos {
	if p, ok := l.pos.lookup(where, true); ok {
		return p
	}
	return l.userPos(where)
}

// eachSchema calls fn with schema, when it is an object, and with each
// schema object below it, through the keywords whose values are schemas,
// maps of schemas or lists of them, each with its location within the
// field (sub is schema's).
func eachSchema(schema any, sub []string, fn func(m map[string]any, sub []string)) {
	m, ok := schema.(map[string]any)
	if !ok {
		return
	}
	fn(m, sub)
	for _, k := range subschemaKeywords {
		eachSchema(m[k], slices.Concat(sub, []string{k}), fn)
	}
	for _, k := range schemaMapKeywords {
		if sm, ok := m[k].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(sm)) {
				eachSchema(sm[name], slices.Concat(sub, []string{k, name}), fn)
			}
		}
	}
	for _, k := range slices.Concat(schemaListKeywords, []string{"items"}) {
		if list, ok := m[k].([]any); ok {
			for i, x := range list {
				eachSchema(x, slices.Concat(sub, []string{k, strconv.Itoa(i)}), fn)
			}
		}
	}
}

// ruleCaseCollision reports two properties of one object of a tool's args
// schema whose names differ only in case.
const ruleCaseCollision = "schema/case-collision"

// checkCaseCollisions reports each property of an object of the tool's
// args schema whose name differs only in case (Unicode case folding, as
// encoding/json matches a member to a struct's field) from one written
// before it in the same properties (in sorted order, for a schema read
// from a file): a tool that decodes its arguments case-insensitively reads
// both as one field, the last given winning, so {"amount": 5, "Amount":
// 500} passes a guard reading args.amount as 5 and refunds 500, and a call
// giving Amount alone passes every check of amount.
//
// The properties an object's allOf branches declare (through nested allOf
// too) are the object's as well, since every branch applies to it: a
// name of one part (the object's own properties, or one branch) twin to a
// name of another is reported at the object, a twin within one branch
// where that branch is visited. So are the properties of a property two
// parts declare (line in the object's own properties and in a branch):
// both schemas describe the one value, and a twin across them is
// reported, at any depth.
func (l *loader) checkCaseCollisions(path []string, schema any, at Pos, fromFile bool) {
	// A prop is a property of an object, with its location (from the
	// top of the field's value), its schema, and the part that declares
	// it: 0 for the object's own, i for allOf branch i-1.
	type prop struct {
		name   string
		where  []string
		schema map[string]any
		part   int
	}
	// collect adds the properties m, at where, declares, through its
	// allOf branches too, each of the part given, or of its own branch
	// where split is set.
	var collect func(props *[]prop, m map[string]any, where []string, part int, split bool)
	collect = func(props *[]prop, m map[string]any, where []string, part int, split bool) {
		if ps, ok := m["properties"].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(ps)) {
				sm, _ := ps[name].(map[string]any)
				*props = append(*props, prop{name, slices.Concat(where, []string{"properties", name}), sm, part})
			}
		}
		branches, _ := m["allOf"].([]any)
		for i, b := range branches {
			if bm, ok := b.(map[string]any); ok {
				p := part
				if split {
					p = i + 1
				}
				collect(props, bm, slices.Concat(where, []string{"allOf", strconv.Itoa(i)}), p, false)
			}
		}
	}
	pos := func(where []string) Pos {
		if f := l.schemaFileOf(where, at); fromFile && f != nil {
			return f.pos(where[len(f.path):])
		}
		return l.schemaPos(where, at)
	}
	// check reports each property of props that differs only in case
	// from one written before it, but where own says the two are left
	// to another visit.
	check := func(props []prop, own func(a, b prop) bool) {
		if !fromFile || l.schemaFileOf(path, at) != nil {
			slices.SortStableFunc(props, func(a, b prop) int {
				pa, pb := pos(a.where), pos(b.where)
				switch {
				case pa.Before(pb):
					return -1
				case pb.Before(pa):
					return 1
				}
				return 0
			})
		}
		first := map[string]prop{}
		for _, p := range props {
			k := jsonwalk.FoldKey(p.name)
			prev, seen := first[k]
			if !seen {
				first[k] = p
				continue
			}
			if own(prev, p) || prev.name == p.name {
				// The same name twice: one property, constrained twice.
				continue
			}
			l.schemaReport(Error, p.where, l.schemaPos(p.where, at), at, fromFile, ruleCaseCollision,
				"%s: differs only in case from the property %q of the same object: a tool that decodes its arguments case-insensitively (Go's encoding/json into a struct) reads both as one field, so a call giving %q passes what checks %q (a guard reading it, the schema's own constraints) and the tool acts on its value; rename one of them",
				fieldName(p.where), prev.name, p.name, prev.name)
		}
	}
	// merged checks, for each name that two parts of props declare, the
	// object the name's schemas in those parts describe together: its
	// properties, each of the part that declares its schema, are one
	// object's, and a twin of two parts is reported there (one of one
	// part, where that part's schema is visited), and so on down.
	var merged func(props []prop)
	merged = func(props []prop) {
		var names []string
		parts := map[string][]prop{}
		for _, p := range props {
			if p.schema == nil {
				continue
			}
			if _, seen := parts[p.name]; !seen {
				names = append(names, p.name)
			}
			parts[p.name] = append(parts[p.name], p)
		}
		for _, name := range names {
			group := parts[name]
			if !slices.ContainsFunc(group, func(p prop) bool { return p.part != group[0].part }) {
				continue
			}
			var child []prop
			for _, p := range group {
				collect(&child, p.schema, p.where, p.part, false)
			}
			check(child, func(a, b prop) bool { return a.part == b.part })
			merged(child)
		}
	}
	eachSchema(schema, nil, func(m map[string]any, sub []string) {
		var props []prop
		collect(&props, m, slices.Concat(path, sub), 0, true)
		// Within one branch: reported where it is visited.
		check(slices.Clone(props), func(a, b prop) bool { return a.part == b.part && a.part != 0 })
		merged(props)
	})
}

// isSchemaLike reports whether m reads as a schema: it has a type.
func isSchemaLike(m map[string]any) bool {
	_, ok := m["type"].(string)
	return ok
}

// schemaFault is one keyword of a schema that its metaschema refuses.
type schemaFault struct{ at, msg string }

// schemaFaults returns the deepest failures of a metaschema validation,
// the first one for each keyword location of the user's schema, sorted.
func schemaFaults(ve *jsonschema.ValidationError) []schemaFault {
	seen := map[string]bool{}
	var out []schemaFault
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if !seen[e.InstanceLocation] {
				seen[e.InstanceLocation] = true
				out = append(out, schemaFault{e.InstanceLocation, e.Message})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// A failure inside a value explains the value's own: a type list
	// holding "nubmer" fails as a list at "nubmer", and as a string of
	// the enumeration at the list.
	out = slices.DeleteFunc(out, func(f schemaFault) bool {
		return slices.ContainsFunc(out, func(g schemaFault) bool { return strings.HasPrefix(g.at, f.at+"/") })
	})
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// checkArgRefs reports a url_arg or path_arg reference that is not a valid
// reference, or that the tool's argument schema says cannot hold a string
// there (a property it does not have, an array step through a value that
// is not an array, a value of another type): egress and file_check would
// find no string to check, and block every call of the tool.
func (l *loader) checkArgRefs(t *Tool) {
	for _, ref := range []struct {
		field string
		refs  []string
		pos   Pos
	}{{"url_arg", t.URLArgs, t.URLArgPos}, {"path_arg", t.PathArgs, t.PathArgPos}} {
		for i, r := range ref.refs {
			pos := ref.pos
			if len(ref.refs) > 1 || l.isList(t.Name, ref.field) {
				pos = l.userPos([]string{"tools", t.Name, ref.field, strconv.Itoa(i)})
			}
			p, err := argpath.Parse(r)
			if err != nil {
				l.errorf(pos, "schema/invalid-value", "%s: %v", fieldName([]string{"tools", t.Name, ref.field}), err)
				continue
			}
			if problem := argRefProblem(t, p); problem != "" {
				l.errorf(pos, "schema/bad-reference", "%s: %s", fieldName([]string{"tools", t.Name, ref.field}), problem)
			}
		}
	}
}

// isList reports whether a tool field was written as a list.
func (l *loader) isList(tool, field string) bool {
	_, ok := l.pos.lookup([]string{"tools", tool, field, "0"}, false)
	return ok
}

// argRefProblem follows p through the tool's argument schema and says why
// the schema cannot hold a string there, or "" when it can or when the
// schema does not say (no properties, items or type at some step).
func argRefProblem(t *Tool, p argpath.Path) string {
	var cur map[string]any
	if len(t.Args) == 0 || json.Unmarshal(t.Args, &cur) != nil {
		return ""
	}
	toks := p.Tokens()
	at := ""
	for i, tok := range toks {
		if tok == "*" {
			if ty, ok := cur["type"].(string); ok && ty != "array" {
				return fmt.Sprintf("%q: %s is of type %s, not an array", p, orArgs(at), ty)
			}
			next, ok := cur["items"].(map[string]any)
			if !ok {
				return ""
			}
			cur, at = next, at+"/*"
			continue
		}
		props, ok := cur["properties"].(map[string]any)
		if !ok {
			if ty, ok := cur["type"].(string); ok && ty != "object" && i > 0 {
				return fmt.Sprintf("%q: %s is of type %s, not an object", p, orArgs(at), ty)
			}
			return ""
		}
		next, ok := props[tok].(map[string]any)
		if !ok {
			if _, isBool := props[tok].(bool); isBool {
				return ""
			}
			hint := suggestName(tok, keys(props))
			if i == 0 && strings.Contains(tok, ".") && len(toks) == 1 {
				hint += "; a nested argument is written as a JSON pointer, such as \"/" + strings.ReplaceAll(tok, ".", "/") + "\""
			}
			if i == 0 {
				return fmt.Sprintf("%q is not a property of the tool's args schema%s", tok, hint)
			}
			return fmt.Sprintf("%q: %q is not a property of %s in the tool's args schema%s", p, tok, at, hint)
		}
		cur, at = next, at+"/"+tok
	}
	if ty, ok := cur["type"].(string); ok && ty != "string" {
		return fmt.Sprintf("%q is of type %s in the tool's args schema, not string", p, ty)
	}
	return ""
}

func orArgs(at string) string {
	if at == "" {
		return "the arguments"
	}
	return at
}

// argNames returns the top-level properties of a tool's argument schema.
func argNames(t *Tool) []string {
	var s struct {
		Properties map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(t.Args, &s)
	return keys(s.Properties)
}

// checkRequired reports a name a schema's required lists that its
// properties lack, where nothing else at that level (patternProperties,
// allOf, $ref...) could describe it: a typo, so the property the schema
// describes is optional and a predicate reading it is refused, while every
// call is refused for lacking the misspelt one. sub is the JSON pointer of
// schema within the document at path.
func (l *loader) checkRequired(path []string, schema any, sub []string, at Pos, fromFile bool) {
	m, ok := schema.(map[string]any)
	if !ok {
		return
	}
	props, hasProps := m["properties"].(map[string]any)
	for _, k := range []string{"patternProperties", "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "dependentSchemas", "if", "unevaluatedProperties"} {
		if _, ok := m[k]; ok {
			hasProps = false
		}
	}
	if req, ok := m["required"].([]any); ok && hasProps {
		names := slices.Sorted(maps.Keys(props))
		for i, r := range req {
			name, ok := r.(string)
			if !ok {
				continue
			}
			if _, ok := props[name]; ok {
				continue
			}
			where := slices.Concat(path, sub, []string{"required", strconv.Itoa(i)})
			has := "none"
			if len(names) > 0 {
				has = strings.Join(names, ", ")
			}
			l.schemaReport(Error, where, l.userPos(where), at, fromFile, "schema/invalid-value", "%s: required names %q, which properties does not describe (it describes %s)%s",
				fieldName(where), name, has, suggestName(name, names))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		l.checkRequired(path, props[name], slices.Concat(sub, []string{"properties", name}), at, fromFile)
	}
	if items, ok := m["items"]; ok {
		l.checkRequired(path, items, slices.Concat(sub, []string{"items"}), at, fromFile)
	}
}
