package compiler

import (
	"slices"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// servedMetaKeys are the keys of run.meta agentc serve sets, from the key
// it admitted (metaKeyValues says what they hold).
var servedMetaKeys = []string{"key", "tenant"}

// checkMetaKeys warns, in a chat or tool predicate of a policy that
// declares keys, of each read of a key of run.meta that agentc serve never
// sets (run.meta.?tenat, has(run.meta.kye), 'region' in run.meta): under
// serve it is always absent, so a test of it never holds. A warning with
// the closest key, as for run.meta.tenant's values: a host embedding
// agentc sets run.meta as it likes. A policy with a turn chain is such a
// host's (its agent turns run the tool chain too) and is not checked.
func (c *Compilation) checkMetaKeys(x *dsl.Expr, stage predicate.Stage) {
	if len(c.Policy.Keys) == 0 || len(c.Policy.Chains["turn"]) > 0 || stage != predicate.Chat && stage != predicate.Tool {
		return
	}
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	seen := map[string]bool{}
	report := func(key string, at ast.Expr) {
		if seen[key] || slices.Contains(servedMetaKeys, key) {
			return
		}
		seen[key] = true
		mean := ""
		if best := textdist.Closest(key, servedMetaKeys); best != "" {
			mean = "; did you mean '" + best + "'?"
		}
		c.report(dsl.Warnf(x.PosAt(f.offset(at)), ruleUnknownValue,
			"run.meta has no key '%s' under agentc serve, which sets tenant and key from the key it admitted: a read of it finds nothing, and a test of it never holds%s", key, mean))
	}
	isMeta := func(e ast.Expr) bool { return pathKey(e) == "run.meta" }
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			if isMeta(s.Operand()) {
				report(s.FieldName(), e)
			}
			walk(s.Operand())
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			switch fn := c.FunctionName(); {
			case (fn == operators.Index || fn == operators.OptIndex || fn == operators.OptSelect) && len(a) == 2 && isMeta(a[0]):
				if s, ok := stringLiteral(a[1]); ok {
					report(s, a[1])
				}
			case fn == operators.In && len(a) == 2 && isMeta(a[1]):
				if s, ok := stringLiteral(a[0]); ok {
					report(s, a[0])
				}
			}
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, arg := range a {
				walk(arg)
			}
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			for _, sub := range []ast.Expr{comp.IterRange(), comp.AccuInit(), comp.LoopCondition(), comp.LoopStep(), comp.Result()} {
				walk(sub)
			}
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				walk(en.AsMapEntry().Key())
				walk(en.AsMapEntry().Value())
			}
		}
	}
	walk(tree.Expr())
}
