package vet

import (
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// A ResultRead is a read of one field of a tool's result in a predicate:
// result.status, has(result.status) or result['status'] (or of one of its
// arguments, args.path: ArgReads).
type ResultRead struct {
	Field string
	// Offset is the byte offset of the field's name in the source.
	Offset int
}

// ResultReads returns the fields a predicate reads off result, in source
// order; none when it does not parse.
func ResultReads(src string) []ResultRead { return fieldReads(src, "result", true) }

// ArgReads returns the arguments whose value a predicate reads off args
// (args.path, args['path']), in source order; none when it does not parse.
// A presence test (has(args.path)) does not read the value.
func ArgReads(src string) []ResultRead { return fieldReads(src, "args", false) }

// fieldReads returns the fields a predicate reads off the variable root,
// with presence tests when tests is set.
func fieldReads(src, root string, tests bool) []ResultRead {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	info := tree.SourceInfo()
	// at returns the byte offset of name at or just after e's first token.
	at := func(e ast.Expr, name string, within int) int {
		r, _ := info.GetOffsetRange(e.ID())
		off := runeToByte(src, int(r.Start))
		if i := strings.Index(src[off:], name); i >= 0 && (within < 0 || i <= within) {
			off += i
		}
		return off
	}
	isResult := func(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == root }
	var out []ResultRead
	ast.PostOrderVisit(tree.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			if isResult(s.Operand()) && (tests || !s.IsTestOnly()) {
				out = append(out, ResultRead{Field: s.FieldName(), Offset: at(s.Operand(), s.FieldName(), -1)})
			}
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index && c.FunctionName() != operators.OptIndex || len(c.Args()) != 2 || !isResult(c.Args()[0]) {
				return
			}
			if k := c.Args()[1]; k.Kind() == ast.LiteralKind {
				if s, ok := k.AsLiteral().(types.String); ok {
					out = append(out, ResultRead{Field: string(s), Offset: at(k, string(s), 3)}) // past the quote
				}
			}
		}
	}))
	slices.SortStableFunc(out, func(a, b ResultRead) int { return a.Offset - b.Offset })
	return out
}
