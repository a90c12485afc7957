package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// resultFields returns the properties a tool's result_schema gives its
// result: ok is false when the schema lets the result hold fields it does
// not list (additionalProperties or patternProperties, a composition, a
// reference), so that a read of another field may be right. A schema whose
// type cannot be an object gives none.
func resultFields(raw json.RawMessage) (fields []string, ok bool) {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	for _, k := range []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "not", "patternProperties", "dependentSchemas", "unevaluatedProperties"} {
		if _, open := s[k]; open {
			return nil, false
		}
	}
	switch t := s["type"].(type) {
	case string:
		if t != "object" {
			return nil, true
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return nil, true
		}
	}
	if ap, set := s["additionalProperties"]; set && ap != false {
		return nil, false
	}
	props, isMap := s["properties"].(map[string]any)
	if !isMap {
		return nil, false
	}
	for name := range props {
		fields = append(fields, name)
	}
	slices.Sort(fields)
	return fields, true
}

// checkResultReads checks the fields a tool-stage predicate of phase
// "after" reads off result against the result_schema of the tools its
// entry applies to (the declared tools when it is unscoped). result is
// untyped at run time: a field the result lacks fails the read, and a
// guard fails closed, blocking every call of the tool after it ran. A
// field no result_schema lists is an error; a read where a tool declares
// no result_schema is a warning (cel/untyped-args), as a misspelt field
// cannot be caught. Nothing is said when the policy lets undeclared tools
// run, or a schema leaves the result open.
func (c *Compilation) checkResultReads(x *dsl.Expr, tools []string) {
	reads := vet.ResultReads(x.Source)
	if len(reads) == 0 {
		return
	}
	p := c.Policy
	names := tools
	if len(names) == 0 {
		if p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
			return
		}
		names = sortedNames(p.Tools)
	}
	var fields, untyped []string
	for _, name := range names {
		t := p.Tools[name]
		if t == nil {
			return // an undeclared tool: its result is unknown
		}
		if len(t.ResultSchema) == 0 {
			untyped = append(untyped, name)
			continue
		}
		fs, ok := resultFields(t.ResultSchema)
		if !ok {
			return
		}
		for _, f := range fs {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
	}
	if len(untyped) > 0 {
		c.report(dsl.Warnf(x.PosAt(reads[0].Offset), predicate.RuleUntypedArgs,
			"predicate reads result.%s, but %s declares no result_schema: a misspelt field is not caught, and a read of one the result lacks fails at run time (an evaluation error, after the tool ran); declare the tool's result_schema",
			reads[0].Field, "`"+strings.Join(untyped, "`, `")+"`"))
		return
	}
	var seen []string
	for _, r := range reads {
		if slices.Contains(fields, r.Field) || slices.Contains(seen, r.Field) {
			continue
		}
		seen = append(seen, r.Field)
		msg := fmt.Sprintf("undefined field '%s': the result_schema of %s does not list it: the read fails whenever the result lacks it (an evaluation error, after the tool ran), and has() of it is always false", r.Field, "`"+strings.Join(names, "`, `")+"`")
		if best := textdist.Closest(r.Field, fields); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		c.report(dsl.Errorf(x.PosAt(r.Offset), predicate.RuleType, "%s", msg))
	}
}
