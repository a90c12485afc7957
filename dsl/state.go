package dsl

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
)

// decodeState decodes the state section and checks what the schema cannot:
// one kind per handler, message and replacement beside the kind they go
// with, on_append on an array field, the redact patterns, and the
// background sinks' fields and stores.
func (l *loader) decodeState(p *Policy, v cue.Value) {
	sv := v.LookupPath(fieldPath("state"))
	if !sv.Exists() {
		return
	}
	st := &State{Pos: l.userPos([]string{"state"}), Fields: map[string]*StateField{}}
	if n, err := sv.LookupPath(fieldPath("queue")).Int64(); err == nil {
		st.Queue = int(n)
	}
	user := l.user.LookupPath(fieldPath("state"))
	eachField(user, sv, "fields", func(name string, fv cue.Value) {
		path := []string{"state", "fields", name}
		f := &StateField{Name: name, Pos: l.userPos(path)}
		if pos, ok := l.pos.lookup(path, true); ok {
			f.Pos = pos
		}
		f.Secret, _ = fv.LookupPath(fieldPath("secret")).Bool()
		if sch := fv.LookupPath(fieldPath("schema")); sch.Exists() {
			f.SchemaPos = l.userPos(append(path, "schema"))
			f.Schema = l.jsonSchema(append(path, "schema"), sch, f.SchemaPos)
			l.checkSchema(append(path, "schema"), f.Schema, f.SchemaPos, sch.Kind() == cue.StringKind)
		}
		for _, op := range []string{"on_set", "on_append"} {
			hl := fv.LookupPath(fieldPath(op))
			if !hl.Exists() {
				continue
			}
			it, err := hl.List()
			if err != nil {
				continue
			}
			for i := 0; it.Next(); i++ {
				if h := l.decodeStateHandler(append(path, op), op, i, it.Value()); h != nil {
					l.checkHandlerReach(append(path, op), i, h, f.Schema)
					if op == "on_set" {
						f.OnSet = append(f.OnSet, h)
					} else {
						f.OnAppend = append(f.OnAppend, h)
					}
				}
			}
			if op == "on_append" && len(f.Schema) > 0 && !schemaIsArray(f.Schema) {
				l.errorf(l.userPos(append(path, op)), "schema/invalid-value",
					"%s: the field's schema is not an array, so nothing can be appended to it", fieldName([]string{"state", "fields", name, "on_append"}))
			}
		}
		if bl := fv.LookupPath(fieldPath("background")); bl.Exists() {
			it, _ := bl.List()
			for i := 0; it.Next(); i++ {
				f.Background = append(f.Background, l.decodeStateSink(p, append(path, "background", fmt.Sprint(i)), it.Value()))
			}
		}
		st.Fields[name] = f
	})
	p.State = st
}

// decodeStateHandler decodes one handler of a field's op list.
func (l *loader) decodeStateHandler(list []string, op string, i int, hv cue.Value) *StateHandler {
	path := append(append([]string{}, list...), fmt.Sprint(i))
	at := func(field string) Pos { return l.userPos(append(append([]string{}, path...), field)) }
	h := &StateHandler{Op: op, Index: i, Pos: l.userPos(path)}
	var kinds []string
	if dv := hv.LookupPath(fieldPath("deny")); dv.Exists() {
		h.Deny = l.expr(append(path, "deny"), dv)
		kinds = append(kinds, "deny")
	}
	if rv := hv.LookupPath(fieldPath("redact")); rv.Exists() {
		h.IsRedact, h.Redact = true, []string{}
		_ = rv.Decode(&h.Redact)
		for j, pat := range h.Redact {
			l.checkRegexp(append(append([]string{}, path...), "redact", fmt.Sprint(j)), pat)
		}
		kinds = append(kinds, "redact")
	}
	if tv := hv.LookupPath(fieldPath("truncate")); tv.Exists() {
		n, _ := tv.Int64()
		h.Truncate = int(n)
		kinds = append(kinds, "truncate")
	}
	if sv := hv.LookupPath(fieldPath("set")); sv.Exists() {
		h.Set = l.expr(append(path, "set"), sv)
		kinds = append(kinds, "set")
	}
	where := dotted(path)
	switch len(kinds) {
	case 0:
		l.errorf(h.Pos, "schema/invalid-value", "%s: a handler needs one of deny, redact, truncate and set", where)
		return nil
	case 1:
	default:
		l.errorf(at(kinds[1]), "schema/invalid-value", "%s: a handler has one of deny, redact, truncate and set, not both %s and %s; write two handlers", where, kinds[0], kinds[1])
		return nil
	}
	if mv := hv.LookupPath(fieldPath("message")); mv.Exists() {
		h.Message, _ = mv.String()
		if h.Deny == nil {
			l.errorf(at("message"), "schema/invalid-value", "%s: message goes with deny", where)
		}
	}
	if rv := hv.LookupPath(fieldPath("replacement")); rv.Exists() {
		h.Replacement, _ = rv.String()
		if !h.IsRedact {
			l.errorf(at("replacement"), "schema/invalid-value", "%s: replacement goes with redact", where)
		}
	} else {
		h.Replacement = "[REDACTED]"
	}
	return h
}

// decodeStateSink decodes one background sink.
func (l *loader) decodeStateSink(p *Policy, path []string, sv cue.Value) *StateSink {
	at := func(field string) Pos { return l.userPos(append(append([]string{}, path...), field)) }
	s := &StateSink{Pos: l.userPos(path)}
	s.Sink, _ = sv.LookupPath(fieldPath("sink")).String()
	s.Store, _ = sv.LookupPath(fieldPath("store")).String()
	s.URL, _ = sv.LookupPath(fieldPath("url")).String()
	s.URLEnv, _ = sv.LookupPath(fieldPath("url_env")).String()
	where := dotted(path)
	if s.Store != "" {
		if s.Sink != "audit" {
			l.errorf(at("store"), "schema/invalid-value", "%s: store goes with sink: \"audit\"", where)
		} else if _, ok := p.Stores[s.Store]; !ok && s.Store != "default" {
			l.errorf(at("store"), "schema/bad-reference", "store %q is not declared in stores%s", s.Store, suggestName(s.Store, keys(p.Stores)))
		}
	}
	for _, f := range []struct{ name, v string }{{"url", s.URL}, {"url_env", s.URLEnv}} {
		if f.v != "" && s.Sink != "webhook" {
			l.errorf(at(f.name), "schema/invalid-value", "%s: %s goes with sink: \"webhook\"", where, f.name)
		}
	}
	if s.Sink == "webhook" && s.URL != "" && urlHasPassword(s.URL) {
		l.warnf(at("url"), "schema/invalid-value",
			"%s.url holds a password: the plan agentc build writes carries the url as given, and so does every log or copy of the plan; put the url in an environment variable and name it with url_env", where)
	}
	if s.Sink == "webhook" && s.URL == "" && s.URLEnv == "" {
		l.errorf(at("sink"), "schema/invalid-value", "%s: a webhook needs url or url_env", where)
	}
	return s
}

// checkHandlerReach reports a redact or truncate handler that can change
// nothing: redact rewrites the value's strings and truncate its strings and
// lists, so on a field whose schema holds neither (an integer, a number, a
// boolean, an object of them) the handler leaves every value as it was,
// and a value the policy meant to mask reaches the background sinks and the
// checkpoints in clear. An on_append handler sees the element appended,
// typed by the schema's items.
func (l *loader) checkHandlerReach(list []string, i int, h *StateHandler, schema json.RawMessage) {
	var kind string
	var reach []string
	switch {
	case h.IsRedact:
		kind, reach = "redact", []string{"string"}
	case h.Truncate > 0:
		kind, reach = "truncate", []string{"string", "array"}
	default:
		return
	}
	var s any
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return
	}
	what := "the field's schema"
	if h.Op == "on_append" {
		m, ok := s.(map[string]any)
		if !ok || !schemaIsArray(schema) {
			return // no array: reported as such
		}
		if s, ok = m["items"]; !ok {
			return
		}
		what = "the schema of the field's items"
	}
	if schemaMayHold(s, reach, 0) {
		return
	}
	path := append(append([]string{}, list...), fmt.Sprint(i))
	does := "replaces matches in the value's strings"
	if kind == "truncate" {
		does = "shortens the value's strings and lists"
	}
	l.errorf(l.userPos(append(path, kind)), "schema/invalid-value",
		"%s: %s %s, and %s (%s) holds none: the handler changes nothing, so every value passes it as it came; remove the handler, or change the field's schema",
		dotted(path), kind, does, what, schemaTypes(s))
}

// schemaMayHold reports whether a value a JSON Schema accepts may be, or
// hold at any depth, a value of one of the JSON types kinds. A schema it
// cannot read (no type, a combinator or a reference) may hold anything.
func schemaMayHold(s any, kinds []string, depth int) bool {
	m, ok := s.(map[string]any)
	if !ok || depth > 32 {
		return true // true, false or unreadable
	}
	for _, k := range []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "not", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				types = append(types, s)
			}
		}
	default:
		return true
	}
	for _, t := range types {
		if slices.Contains(kinds, t) {
			return true
		}
		switch t {
		case "array":
			for _, k := range []string{"items", "prefixItems", "additionalItems", "contains"} {
				sub, ok := m[k]
				if !ok {
					continue
				}
				if list, ok := sub.([]any); ok {
					if slices.ContainsFunc(list, func(e any) bool { return schemaMayHold(e, kinds, depth+1) }) {
						return true
					}
				} else if schemaMayHold(sub, kinds, depth+1) {
					return true
				}
			}
			if _, ok := m["items"]; !ok {
				return true
			}
		case "object":
			for _, k := range []string{"properties", "patternProperties"} {
				props, _ := m[k].(map[string]any)
				for _, sub := range props {
					if schemaMayHold(sub, kinds, depth+1) {
						return true
					}
				}
			}
			switch ap := m["additionalProperties"].(type) {
			case bool:
				if ap {
					return true
				}
			default: // absent (any property), or a schema
				if schemaMayHold(ap, kinds, depth+1) {
					return true
				}
			}
		}
	}
	return false
}

// schemaTypes names a schema's JSON types for a message: "integer",
// "integer or null".
func schemaTypes(s any) string {
	m, _ := s.(map[string]any)
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		var names []string
		for _, e := range t {
			names = append(names, fmt.Sprint(e))
		}
		return strings.Join(names, " or ")
	}
	return "any"
}

// schemaIsArray reports whether a JSON Schema may describe an array: its
// type is "array" or lists it. A schema without a type says nothing, and
// is taken as one.
func schemaIsArray(raw json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil || s.Type == nil {
		return true
	}
	switch t := s.Type.(type) {
	case string:
		return t == "array"
	case []any:
		for _, e := range t {
			if e == "array" {
				return true
			}
		}
	}
	return false
}

// dotted renders a path as the policy writes it: state.fields.a.on_set[0].
func dotted(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
