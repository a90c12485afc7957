package compiler

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// overloadRE matches cel-go's report of a comparison of two values of
// different types: found no matching overload for '_==_' applied to
// '(double, int)'.
var overloadRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^found no matching overload for '(_==_|_!=_|_<_|_<=_|_>_|_>=_)' applied to '\((int|uint|double|string|bool), (int|uint|double|string|bool)\)'`)
})

// inOverloadRE matches cel-go's report of an in test of a number in a list
// of numbers of another type: found no matching overload for '@in'
// applied to '(double, list(int))'.
var inOverloadRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^found no matching overload for '(@in)' applied to '\((int|double), list\((int|double)\)\)'`)
})

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
	m := overloadRE().FindStringSubmatch(msg)
	if m == nil {
		m = inOverloadRE().FindStringSubmatch(msg)
	}
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
	if m[1] == operators.In {
		return numberInHint(f, call, m[2], m[3])
	}
	if args[0].Kind() != ast.LiteralKind && args[1].Kind() != ast.LiteralKind {
		return numbersHint(f, call, m[1], m[2], m[3])
	}
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
	return f.offset(constant), fmt.Sprintf("; %s is %s and %s %s: CEL's %s compares values of one type, so %s",
		name, typedAs(name, fieldType), text, kindArticle[constType], op, advice), true
}

// typedAs names the CEL type t of the value written name, with the JSON
// Schema type it comes from for an argument or a result's field: "a double
// (a JSON Schema number)".
func typedAs(name, t string) string {
	what := kindArticle[t]
	if schema := map[string]string{"int": "integer", "double": "number"}[t]; schema != "" && (strings.HasPrefix(name, "args.") || strings.HasPrefix(name, "result.")) {
		what += " (a JSON Schema " + schema + ")"
	}
	return what
}

// exprText writes e as CEL, "the value compared" when it cannot.
func (f folder) exprText(e ast.Expr) string {
	if text, err := parser.Unparse(e, f.info); err == nil {
		return text
	}
	return "the value compared"
}

// numbersHint completes the report of an == or != (fn) of two values that
// are not constants, an int and a double (leftType, rightType): the int is
// made a double, the one type both hold (double() of an int a double does
// not hold exactly is an evaluation error, not its neighbour). ok is false
// for other types.
func numbersHint(f folder, call ast.Expr, fn, leftType, rightType string) (at int, hint string, ok bool) {
	if fn != operators.Equals && fn != operators.NotEquals || !isIntDouble(leftType, rightType) {
		return 0, "", false
	}
	args := call.AsCall().Args()
	left, right := f.exprText(args[0]), f.exprText(args[1])
	fixed := left + " " + comparisonOps[fn] + " double(" + right + ")"
	if leftType == "int" {
		fixed = "double(" + left + ") " + comparisonOps[fn] + " " + right
	}
	return f.opOffset(call), fmt.Sprintf("; %s is %s and %s %s: CEL's %s compares values of one type, so write %s",
		left, typedAs(left, leftType), right, typedAs(right, rightType), comparisonOps[fn], fixed), true
}

// isIntDouble reports whether a and b are int and double, in either order.
func isIntDouble(a, b string) bool {
	return a == "int" && b == "double" || a == "double" && b == "int"
}

// numberInHint completes the report of an in test (call) of a value of
// type valueType in a list of elemType, an int and a double: a list of
// constants is written in the value's type where each holds it exactly
// (args.amount in [100.0, 200.0]), or else the int value made a double.
func numberInHint(f folder, call ast.Expr, valueType, elemType string) (at int, hint string, ok bool) {
	if !isIntDouble(valueType, elemType) {
		return 0, "", false
	}
	args := call.AsCall().Args()
	value, list := f.exprText(args[0]), f.exprText(args[1])
	at, fixed := f.opOffset(call), ""
	if args[1].Kind() == ast.ListKind {
		at = f.offset(args[1])
		var els []string
		for _, el := range args[1].AsList().Elements() {
			if el.Kind() != ast.LiteralKind {
				els = nil
				break
			}
			switch v := el.AsLiteral().(type) {
			case types.Int:
				els = append(els, fmt.Sprintf("%d.0", int64(v)))
			case types.Double:
				if d := float64(v); d == math.Trunc(d) && math.Abs(d) < 1<<53 {
					els = append(els, fmt.Sprintf("%d", int64(d)))
				}
			}
		}
		if len(els) == len(args[1].AsList().Elements()) && len(els) > 0 {
			fixed = "[" + strings.Join(els, ", ") + "]"
		}
	}
	switch {
	case fixed != "":
	case valueType == "int":
		fixed = "double(" + value + ") in " + list
	default:
		return 0, "", false
	}
	return at, fmt.Sprintf("; %s is %s and %s a list of %ss: CEL's in compares values of one type, so write %s",
		value, typedAs(value, valueType), list, elemType, fixed), true
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
