package compiler

import (
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/parser"
)

// checkConstantUnderWhen reports a guard's deny or require that has one
// value wherever the guard runs: the runtime evaluates the entry's when
// first, so the predicate is read together with it, as checkDeadTerm
// reads it alone. A deny that cannot hold where the when does
// (when: "args.currency == 'EUR'", deny: "args.currency == 'USD' && ...")
// or a require the when makes always true never blocks: an error. A
// require the when makes always false, or a deny it makes always true,
// blocks every call the guard sees: a warning, as the policy fails
// closed. What the when or the predicate decides alone is left to
// checkConstant. An after-phase guard is left alone: the layers inside it
// may rewrite what the when read (a fallback the request's model, redact
// the messages) before its predicate reads it.
func (c *Compilation) checkConstantUnderWhen(x, when *dsl.Expr, checked *predicate.Checked, phase predicate.Phase, kind, field string) {
	if when == nil || kind != "guard" || phase == predicate.After || (field != "deny" && field != "require") {
		return
	}
	facts := factsOf(checked)
	exact := facts.exact
	if _, ok := constantValue(when.Source, facts); ok {
		return
	}
	if _, ok := constantValue(x.Source, facts); ok {
		return
	}
	// Where the when holds, a field it compares with a number is no NaN:
	// the predicate's order comparisons of it negate into the other order
	// in the conjunction with the when (not alone, below).
	notNaN := comparedInConjuncts(when.Source)
	for f := range exact {
		notNaN[f] = true
	}
	negated, ok := negatedSource(x.Source, notNaN)
	if !ok {
		return
	}
	if alone, ok := negatedSource(x.Source, exact); !ok {
		return
	} else if _, ok := constantValue(alone, facts); ok {
		return
	}
	// The guard blocks where deny holds (require does not): value is
	// what the predicate is wherever the when holds, when one of the two
	// conjunctions below cannot hold.
	for _, value := range []bool{false, true} {
		src := x.Source
		if value {
			src = negated
		}
		prefix := "(" + when.Source + ") && ("
		d, ok := constantValue(prefix+src+")", facts)
		if !ok || d.value {
			continue
		}
		what, inert := constantOutcome(kind, field, value)
		diag := dsl.Errorf
		if !inert {
			diag = dsl.Warnf
		}
		pos := x.Pos
		if !value && d.offset >= len(prefix) {
			pos = x.PosAt(d.offset - len(prefix))
		}
		head, outcome, _ := strings.Cut(what, ": ")
		// The conjunction that cannot hold is what blocking (a deny, a
		// require's failure) or letting a call through needs.
		needs := "for it to block"
		if value == (field == "deny") {
			needs = "for it to let a call through"
		}
		c.report(diag(pos, ruleConstant, "%s where its when (%s) holds, and the guard sees no other call: %s (%s, %s, whatever its variables hold); fix the condition or the when",
			head, when.Source, outcome, needs, d.why))
		return
	}
}

// negatedSource writes the negation of the predicate src with the
// negations pushed down to its comparisons (!(a && b) is !a || !b,
// !(x == 'a') is x != 'a'), so that constantValue can read the terms. An
// order comparison is negated into the other order only for a field that
// cannot be NaN (those exact names, or a size()) compared with a number
// or another such field: NaN satisfies neither x < 1.0 nor x >= 1.0;
// anything else stays under a !.
func negatedSource(src string, exact map[string]bool) (string, bool) {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return "", false
	}
	info := tree.SourceInfo()
	text := func(e ast.Expr) (string, bool) {
		s, err := parser.Unparse(e, info)
		return s, err == nil
	}
	opposite := map[string]string{
		operators.Equals: " != ", operators.NotEquals: " == ",
		operators.Less: " >= ", operators.LessEquals: " > ", operators.Greater: " <= ", operators.GreaterEquals: " < ",
	}
	var negate func(ast.Expr) (string, bool)
	negate = func(e ast.Expr) (string, bool) {
		if e.Kind() == ast.CallKind {
			call := e.AsCall()
			args := call.Args()
			switch fn := call.FunctionName(); fn {
			case operators.LogicalAnd, operators.LogicalOr:
				sep := " || "
				if fn == operators.LogicalOr {
					sep = " && "
				}
				l, okL := negate(args[0])
				r, okR := negate(args[1])
				if !okL || !okR {
					return "", false
				}
				return "(" + l + sep + r + ")", true
			case operators.LogicalNot:
				return text(args[0])
			case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
				ordered := fn != operators.Equals && fn != operators.NotEquals
				if !ordered || neverNaNOperand(args[0], exact) && neverNaNOperand(args[1], exact) {
					l, okL := text(args[0])
					r, okR := text(args[1])
					if !okL || !okR {
						return "", false
					}
					return l + opposite[fn] + r, true
				}
			}
		}
		s, ok := text(e)
		return "!(" + s + ")", ok
	}
	return negate(tree.Expr())
}

// neverNaNOperand reports whether e cannot be NaN: a number written out,
// a field exact names (an int), or a size().
func neverNaNOperand(e ast.Expr, exact map[string]bool) bool {
	if _, ok := number(e); ok {
		return true
	}
	field, ok := fieldPath(e)
	return ok && (exact[field] || strings.HasPrefix(field, "size("))
}

// comparedInConjuncts returns the fields that src, a when, compares with a
// number written out (==, <, <=, >, >=) in a term that must hold for it to
// hold (src itself, or a term of an && of such terms): where src holds,
// none of them is NaN, which satisfies no such comparison.
func comparedInConjuncts(src string) map[string]bool {
	out := map[string]bool{}
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return out
	}
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.LogicalAnd:
			walk(args[0])
			walk(args[1])
		case operators.Equals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
			for i, a := range args {
				if _, ok := number(args[1-i]); !ok {
					continue
				}
				if f, ok := fieldPath(a); ok {
					out[f] = true
				}
			}
		}
	}
	walk(tree.Expr())
	return out
}
