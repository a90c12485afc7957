package compiler

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// overloadRE matches cel-go's report of a comparison of two values of
// different types: found no matching overload for '_==_' applied to
// '(double, int)'.
var overloadRE = regexp.MustCompile(`^found no matching overload for '(_==_|_!=_|_<_|_<=_|_>_|_>=_)' applied to '\((int|uint|double|string|bool), (int|uint|double|string|bool)\)'`)

// comparisonOps are the CEL operators overloadRE names, as written.
var comparisonOps = map[string]string{
	operators.Equals: "==", operators.NotEquals: "!=", operators.Less: "<",
	operators.LessEquals: "<=", operators.Greater: ">", operators.GreaterEquals: ">=",
}

// mismatchHint completes cel-go's report of a comparison of a field with a
// constant of another type (args.amount == 0, amount a JSON Schema number,
// a double) reported at offset, the operator: it returns the offset of the
// constant, where the fix goes, and what to write instead. ok is false for
// any other issue, or a comparison of two fields.
func mismatchHint(src string, offset int, msg string) (at int, hint string, ok bool) {
	m := overloadRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, "", false
	}
	tree, parsed := predicate.ParseSyntax(src)
	if !parsed {
		return 0, "", false
	}
	f := folder{src: src, info: tree.SourceInfo()}
	var call ast.Expr
	var find func(e ast.Expr)
	find = func(e ast.Expr) {
		if call != nil {
			return
		}
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() == m[1] && len(c.Args()) == 2 && f.opOffset(e) == offset {
				call = e
				return
			}
			if c.IsMemberFunction() {
				find(c.Target())
			}
			for _, a := range c.Args() {
				find(a)
			}
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			for _, x := range []ast.Expr{comp.IterRange(), comp.AccuInit(), comp.LoopCondition(), comp.LoopStep(), comp.Result()} {
				find(x)
			}
		case ast.SelectKind:
			find(e.AsSelect().Operand())
		case ast.ListKind:
			for _, x := range e.AsList().Elements() {
				find(x)
			}
		}
	}
	find(tree.Expr())
	if call == nil {
		return 0, "", false
	}
	args := call.AsCall().Args()
	field, constant, fieldType, constType := args[0], args[1], m[2], m[3]
	if field.Kind() == ast.LiteralKind {
		field, constant, fieldType, constType = constant, field, constType, fieldType
	}
	if constant.Kind() != ast.LiteralKind || field.Kind() == ast.LiteralKind {
		return 0, "", false
	}
	name, isPath := fieldPath(field)
	if !isPath {
		name = "the value compared"
	}
	op := comparisonOps[m[1]]
	text, advice := literalText(constant), ""
	switch v := constant.AsLiteral().(type) {
	case types.Int, types.Uint:
		switch fieldType {
		case "double":
			advice = "write " + strings.TrimSuffix(text, "u") + ".0"
		case "string":
			advice = "write '" + strings.TrimSuffix(text, "u") + "'"
		}
	case types.Double:
		d := float64(v)
		switch {
		case fieldType == "int" && d == math.Trunc(d) && math.Abs(d) < 1<<53:
			advice = fmt.Sprintf("write %d", int64(d))
		case fieldType == "int":
			advice = fmt.Sprintf("write double(%s) %s %s", name, op, text)
		case fieldType == "string":
			advice = "write '" + strconv.FormatFloat(d, 'g', -1, 64) + "'"
		}
	case types.String:
		n, err := strconv.ParseFloat(string(v), 64)
		switch {
		case fieldType == "bool" && (v == "true" || v == "false"):
			advice = "write " + string(v)
		case err == nil && fieldType == "double":
			advice = "write " + strconv.FormatFloat(n, 'f', -1, 64)
			if n == math.Trunc(n) {
				advice += ".0"
			}
		case err == nil && fieldType == "int" && n == math.Trunc(n):
			advice = "write " + string(v)
		}
	}
	if advice == "" {
		advice = "compare it with " + celTypePhrase(fieldType)
	}
	what := kindArticle[fieldType]
	if schema := map[string]string{"int": "integer", "double": "number"}[fieldType]; schema != "" && (strings.HasPrefix(name, "args.") || strings.HasPrefix(name, "result.")) {
		what += " (a JSON Schema " + schema + ")"
	}
	return f.offset(constant), fmt.Sprintf("; %s is %s and %s %s: CEL's %s compares values of one type, so %s",
		name, what, text, kindArticle[constType], op, advice), true
}

// literalText renders a constant as CEL writes it.
func literalText(e ast.Expr) string {
	switch v := e.AsLiteral().(type) {
	case types.String:
		return "'" + string(v) + "'"
	case types.Double:
		t := strconv.FormatFloat(float64(v), 'g', -1, 64)
		if !strings.ContainsAny(t, ".eEIN") {
			t += ".0"
		}
		return t
	case types.Uint:
		return fmt.Sprintf("%du", uint64(v))
	}
	return fmt.Sprint(e.AsLiteral().Value())
}

// kindArticle names a value of a CEL scalar type.
var kindArticle = map[string]string{"int": "an int", "uint": "a uint", "double": "a double", "string": "a string", "bool": "a bool"}

// celTypePhrase names a value of a CEL scalar type, with an example.
func celTypePhrase(t string) string {
	switch t {
	case "int":
		return "an int (100)"
	case "uint":
		return "a uint (100u)"
	case "double":
		return "a double (100.0)"
	case "string":
		return "a string ('100')"
	}
	return "a bool (true)"
}

// opOffset returns the byte offset of e's own position (an operator
// call's is its operator), -1 when it has none.
func (f folder) opOffset(e ast.Expr) int {
	r, ok := f.info.GetOffsetRange(e.ID())
	if !ok {
		return -1
	}
	return f.byteOffset(int(r.Start))
}
