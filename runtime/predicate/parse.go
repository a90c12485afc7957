package predicate

import (
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"
)

// ParseSyntax parses src as a predicate is written (CEL's macros, the
// optional syntax, within MaxNestingDepth and MaxSourceBytes) without
// checking it against the variables of a stage, for the compiler's
// readings of a predicate's shape. It reports false when src does not
// parse, which type-checking reports.
func ParseSyntax(src string) (*ast.AST, bool) {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true),
		parser.MaxRecursionDepth(MaxNestingDepth), parser.ExpressionSizeCodePointLimit(MaxSourceBytes))
	if err != nil {
		return nil, false
	}
	tree, errs := p.Parse(common.NewTextSource(src))
	if errs != nil && len(errs.GetErrors()) > 0 {
		return nil, false
	}
	return tree, true
}
