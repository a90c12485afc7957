package vet

import (
	"strconv"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// whensApart reports whether the whens of x and y are never both true of
// one call: each requires one expression of the run to equal a constant (a
// term of the when's top-level &&: run.meta.?tenant.orValue("") ==
// 'alpha'), the same expression in both, and the constants differ. No
// layer between the two changes the run (a fallback rewrites
// request.model, a layer the messages), so the expression has one value
// for the call at both. It must be one that never fails to evaluate
// (runValue): a when that fails applies its layer, and a term that fails
// would not keep the other's layer out. Anything else is not proved apart.
func whensApart(x, y *dsl.Entry) bool {
	if x.When == nil || y.When == nil {
		return false
	}
	xs, ys := runEqualities(x.When.Source), runEqualities(y.When.Source)
	for expr, c := range xs {
		if d, ok := ys[expr]; ok && c != d {
			return true
		}
	}
	return false
}

// runEqualities returns the equalities of a value of the run (runValue)
// with a constant that src requires (the terms of its top-level &&), each
// expression by its canonical text, each constant by its value's text
// (numbers as float64: 1 and 1.0, which CEL holds equal, are one value);
// nil when src does not parse.
func runEqualities(src string) map[string]string {
	env, err := predicate.ModelEnv()
	if err != nil {
		return nil
	}
	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil
	}
	out := map[string]string{}
	var terms func(e ast.Expr)
	terms = func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		switch {
		case call.FunctionName() == operators.LogicalAnd && len(args) == 2:
			terms(args[0])
			terms(args[1])
		case call.FunctionName() == operators.Equals && len(args) == 2:
			for _, pair := range [2][2]ast.Expr{{args[0], args[1]}, {args[1], args[0]}} {
				c, isConst := constant(pair[1])
				v, isRun := runValue(pair[0])
				if _, seen := out[v]; isConst && isRun && !seen {
					// A second constant for one value would make the
					// when never true: another rule's finding; the
					// first is kept.
					out[v] = c
				}
			}
		}
	}
	terms(parsed.NativeRep().Expr())
	return out
}

// constant returns the text of the value of a literal: its type and
// value, numbers as float64 (-0 as 0).
func constant(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	switch v := e.AsLiteral().(type) {
	case types.String:
		return "s" + strconv.Quote(string(v)), true
	case types.Bool:
		return "b" + strconv.FormatBool(bool(v)), true
	case types.Null:
		return "null", true
	}
	if n, ok := numberLiteral(e); ok {
		if n == 0 {
			n = 0 // -0.0, which CEL holds equal to 0
		}
		return "n" + strconv.FormatFloat(n, 'g', -1, 64), true
	}
	return "", false
}

// runValue returns the canonical text of e when e is a value of the run
// that never fails to evaluate: run.id, run.agent, or a key of run.meta
// read optionally with a default (run.meta.?tenant.orValue(""),
// run.?meta.?tenant.orValue(""), run.meta[?'tenant'].orValue("")). A
// plain run.meta.tenant fails for a run without a tenant, and is not one.
func runValue(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.SelectKind:
		sel := e.AsSelect()
		f := sel.FieldName()
		if !sel.IsTestOnly() && isRun(sel.Operand()) && (f == "id" || f == "agent") {
			return "run." + f, true
		}
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() != "orValue" || !call.IsMemberFunction() || len(args) != 1 {
			return "", false
		}
		def, ok := constant(args[0])
		if !ok || call.Target().Kind() != ast.CallKind {
			return "", false
		}
		opt := call.Target().AsCall()
		oargs := opt.Args()
		if (opt.FunctionName() != operators.OptSelect && opt.FunctionName() != operators.OptIndex) || len(oargs) != 2 {
			return "", false
		}
		key, isStr := literalString(oargs[1])
		if !isStr || !isRunMeta(oargs[0]) {
			return "", false
		}
		return "run.meta[?" + strconv.Quote(key) + "].orValue(" + def + ")", true
	}
	return "", false
}

// isRun reports whether e is the variable run.
func isRun(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == "run" }

// isRunMeta reports whether e is run.meta, or run.?meta (an optional of
// it: its key read optionally stays one).
func isRunMeta(e ast.Expr) bool {
	switch e.Kind() {
	case ast.SelectKind:
		sel := e.AsSelect()
		return !sel.IsTestOnly() && sel.FieldName() == "meta" && isRun(sel.Operand())
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() != operators.OptSelect || len(args) != 2 || !isRun(args[0]) {
			return false
		}
		f, ok := literalString(args[1])
		return ok && f == "meta"
	}
	return false
}

// literalString returns the string a string literal holds.
func literalString(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}
