package vet

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentc-dev/agentc/dsl"
)

// LooseKey reports an idempotent key argument whose value a call may
// write in two ways that key apart.
var LooseKey = &Rule{
	Name:     "state/loose-key",
	Severity: dsl.Warning,
	Doc: `an idempotent key argument that a call may carry as a string or as a number, so the same call is keyed twice and runs twice, or as null, which the layer refuses.

idempotent with key_args keys a side-effecting call on the JSON values of
the arguments it names: equal numbers key alike (7 and 7.0), but the string
"7" and the number 7 are different keys, and so are "true" and true. A key
argument that the tool's args schema lets a call carry both ways (a type
list such as ["string", "integer"], an anyOf or oneOf of a string and a
number or boolean) or does not type at all (a property with only a
description) lets the same order through twice: a model that writes the id
as a number in one call and as a string in the next, or two agents that
write it differently, each run the refund. Give the argument one type
(type: "string", with a pattern if it holds digits), an enum or a const.

A key argument the schema lets be null (a type list with "null", an anyOf
branch of type null, OpenAPI's nullable: true) lets through calls the layer
refuses: it reads a null as missing (keyed on null, every such call would
share one key, and a second refund for another order would be taken for the
first: refused if its arguments differ, never run), so each call carrying
null fails. Make the argument required and not null.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			if e.Use == "idempotent" {
				p.looseKeys(e)
			}
		}
	},
}

func (p *Pass) looseKeys(e *dsl.Entry) {
	tools := e.Tools
	if len(tools) == 0 {
		tools = p.toolNames()
	}
	keyArgs, _ := e.Fields["key_args"].([]any)
	for i, x := range keyArgs {
		arg, _ := x.(string)
		for _, name := range tools {
			t := p.Policy.Tools[name]
			if t == nil || !t.SideEffecting {
				continue
			}
			how := looseArg(t, arg)
			var then string
			switch how {
			case "":
				continue
			case nullable:
				then = fmt.Sprintf("the layer reads a null as missing and refuses every call carrying null for it; make %q required and not null", arg)
			default:
				then = fmt.Sprintf("a call carrying \"7\" and one carrying 7 are keyed apart, and both run; give %q one type (type: \"string\"), an enum or a const", arg)
			}
			p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("key_args.%d", i)),
				Related: []dsl.Related{{Pos: t.ArgsPos, Message: fmt.Sprintf("the args of `%s` are declared here", name)}},
				Message: fmt.Sprintf("%s key_args[%d] names argument %q, which side-effecting tool `%s` %s: %s",
					e.Ref(), i, arg, name, how, then)})
			break
		}
	}
}

// nullable is looseArg's answer for an argument a call may carry as null.
const nullable = "accepts as null"

// looseArg says how the top-level argument arg of t's schema lets a call
// write one value in two ways that key apart, or carry null, which keys
// every such call alike (nullable); "" when it does not, or when the
// schema says nothing of arg (guard/inert's to report).
func looseArg(t *dsl.Tool, arg string) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(t.Args) == 0 || json.Unmarshal(t.Args, &s) != nil {
		return ""
	}
	prop, ok := s.Properties[arg]
	if !ok {
		return ""
	}
	var n struct {
		Nullable bool `json:"nullable"`
	}
	kinds, known := schemaKinds(prop, 0)
	switch {
	case json.Unmarshal(prop, &n) == nil && n.Nullable, slices.Contains(kinds, "null"):
		return nullable
	case !known:
		return ""
	case kinds == nil:
		return "does not type"
	case slices.Contains(kinds, "string") && slices.ContainsFunc(kinds, func(k string) bool {
		return k == "number" || k == "integer" || k == "boolean"
	}):
		return "accepts as a string or as a number"
	}
	return ""
}

// schemaKinds returns the JSON types a schema admits for a scalar: its
// type (a name or a list), or the union of its anyOf or oneOf branches';
// nil (known) when it admits any value, as a schema with no type, enum,
// const nor composition does; known is false when it cannot be told (a
// $ref, an allOf, a branch that cannot).
func schemaKinds(raw json.RawMessage, depth int) (kinds []string, known bool) {
	var s map[string]json.RawMessage
	if depth > 8 || json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	if t, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			return []string{one}, true
		}
		var list []string
		if json.Unmarshal(t, &list) == nil {
			return list, true
		}
		return nil, false
	}
	for _, k := range []string{"enum", "const", "$ref", "$dynamicRef", "allOf", "not", "if"} {
		if _, ok := s[k]; ok {
			return nil, false
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		var branches []json.RawMessage
		if _, ok := s[k]; !ok {
			continue
		}
		if json.Unmarshal(s[k], &branches) != nil {
			return nil, false
		}
		var out []string
		for _, b := range branches {
			ks, ok := schemaKinds(b, depth+1)
			if !ok || ks == nil {
				return nil, false
			}
			out = append(out, ks...)
		}
		return out, true
	}
	return nil, true
}
