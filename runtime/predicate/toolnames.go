package predicate

import (
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// NameTest is a test of tool.name with a string constant a predicate
// makes: tool.name == 'refund', 'refund' != tool.name, tool.name in
// ['refund', 'charge'] (Op "=="), or a method called on tool.name with a
// string (Op "startsWith", "endsWith", "contains", "matches"). A name of
// another path (args.tool.name) is not one.
type NameTest struct {
	Op    string
	Value string
	// Offset is the byte offset in the source of the constant's opening
	// quote.
	Offset int
}

// NameTests returns the tests of tool.name src makes with string
// constants, in the order written; none when src does not parse.
func NameTests(src string) []NameTest {
	tree, ok := ParseSyntax(src)
	if !ok {
		return nil
	}
	pos := newPositions(src)
	offset := func(e ast.Expr) int {
		if r, ok := tree.SourceInfo().GetOffsetRange(e.ID()); ok {
			return pos.fromRuneOffset(int(r.Start))
		}
		return 0
	}
	isName := func(e ast.Expr) bool {
		if e.Kind() != ast.SelectKind || e.AsSelect().FieldName() != "name" || e.AsSelect().IsTestOnly() {
			return false
		}
		op := e.AsSelect().Operand()
		return op.Kind() == ast.IdentKind && op.AsIdent() == "tool"
	}
	var out []NameTest
	add := func(op string, e ast.Expr) {
		if e.Kind() != ast.LiteralKind {
			return
		}
		if v, ok := e.AsLiteral().Value().(string); ok {
			out = append(out, NameTest{Op: op, Value: v, Offset: offset(e)})
		}
	}
	ast.PreOrderVisit(tree.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		args := c.Args()
		switch fn := c.FunctionName(); {
		case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
			for i, a := range args {
				if isName(a) {
					add("==", args[1-i])
				}
			}
		case fn == operators.In && len(args) == 2 && isName(args[0]) && args[1].Kind() == ast.ListKind:
			for _, el := range args[1].AsList().Elements() {
				add("==", el)
			}
		case c.IsMemberFunction() && isName(c.Target()) && len(args) == 1:
			switch fn {
			case "startsWith", "endsWith", "contains", "matches":
				add(fn, args[0])
			}
		case fn == "matches" && !c.IsMemberFunction() && len(args) == 2 && isName(args[0]):
			add(fn, args[1])
		}
	}))
	return out
}
