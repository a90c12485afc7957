package main

import (
	"cuelang.org/go/cue/ast"
)

// closingKeys are the keywords of an input schema that say which arguments
// beyond its properties it takes: a schema with one says it itself, and
// closeArgs leaves it as written.
var closingKeys = []string{"additionalProperties", "unevaluatedProperties", "patternProperties"}

// composingKeys are the keywords through which a schema's properties may
// come from another schema ($ref, allOf...): additionalProperties, which
// sees only the properties beside it, would refuse those, so such a schema
// is closed with unevaluatedProperties, which sees the properties each of
// them evaluated.
var composingKeys = []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "not"}

// closeArgs closes args, a tool's input schema as printed, to the
// arguments it lists, unless schema (the same, decoded) says itself which
// others it takes: the tool chain checks a call against the declaration,
// so an argument the upstream adds later (a mirror URL, an alternative
// path) is refused, not passed unchecked by file_check, egress and the
// guards typed against the declaration.
func closeArgs(args ast.Expr, schema map[string]any) {
	s, ok := args.(*ast.StructLit)
	if !ok {
		return
	}
	for _, k := range closingKeys {
		if _, says := schema[k]; says {
			return
		}
	}
	key := "additionalProperties"
	for _, k := range composingKeys {
		if _, composed := schema[k]; composed {
			key = "unevaluatedProperties"
			break
		}
	}
	s.Elts = append(s.Elts, &ast.Field{Label: ast.NewIdent(key), Value: ast.NewBool(false)})
}
