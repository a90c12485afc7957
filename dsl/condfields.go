package dsl

import (
	"io/fs"
	"slices"
	"strconv"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/agentc-dev/agentc/schemas"
)

// condField is a field a schema struct declares only under a condition on
// one of its other fields: `if kind == "chat" { model!: ... }`.
type condField struct {
	// On is the field the condition reads ("kind") and Value the string
	// it must equal ("chat").
	On, Value string
	// Siblings are the struct's fields declared without a condition; a
	// struct of the user's is taken for this one when it allows them all.
	Siblings []string
}

var (
	condOnce   sync.Once
	condFields map[string][]condField // by field name
)

// conditionalFields returns the fields of the builtin schemas declared
// under an `if FIELD == "value"` condition, by name.
func conditionalFields() map[string][]condField {
	condOnce.Do(func() {
		condFields = map[string][]condField{}
		entries, err := fs.ReadDir(schemas.CUE, ".")
		if err != nil {
			return
		}
		for _, e := range entries {
			b, err := fs.ReadFile(schemas.CUE, e.Name())
			if err != nil {
				continue
			}
			f, err := parser.ParseFile(e.Name(), b)
			if err != nil {
				continue
			}
			ast.Walk(f, func(n ast.Node) bool {
				if st, ok := n.(*ast.StructLit); ok {
					collectCondFields(st.Elts)
				}
				return true
			}, nil)
		}
	})
	return condFields
}

// collectCondFields records the conditional fields of one struct's
// declarations.
func collectCondFields(elts []ast.Decl) {
	var siblings []string
	for _, d := range elts {
		if f, ok := d.(*ast.Field); ok {
			if name, _, err := ast.LabelName(f.Label); err == nil {
				siblings = append(siblings, name)
			}
		}
	}
	for _, d := range elts {
		c, ok := d.(*ast.Comprehension)
		if !ok || len(c.Clauses) != 1 {
			continue
		}
		ic, ok := c.Clauses[0].(*ast.IfClause)
		if !ok {
			continue
		}
		b, ok := ic.Condition.(*ast.BinaryExpr)
		if !ok || b.Op != token.EQL {
			continue
		}
		id, ok := b.X.(*ast.Ident)
		lit, ok2 := b.Y.(*ast.BasicLit)
		if !ok || !ok2 || lit.Kind != token.STRING {
			continue
		}
		val, err := strconv.Unquote(lit.Value)
		if err != nil {
			continue
		}
		st, ok := c.Value.(*ast.StructLit)
		if !ok {
			continue
		}
		for _, fd := range st.Elts {
			f, ok := fd.(*ast.Field)
			if !ok {
				continue
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				continue
			}
			condFields[name] = append(condFields[name], condField{On: id.Name, Value: val, Siblings: siblings})
		}
	}
}

// conditionFor returns the condition under which a struct whose allowed
// fields are allowed declares the field name, when it declares it under one.
func conditionFor(name string, allowed []string) (condField, bool) {
	for _, c := range conditionalFields()[name] {
		if !slices.Contains(allowed, c.On) {
			continue
		}
		all := true
		for _, s := range c.Siblings {
			if !slices.Contains(allowed, s) {
				all = false
				break
			}
		}
		if all {
			return c, true
		}
	}
	return condField{}, false
}
