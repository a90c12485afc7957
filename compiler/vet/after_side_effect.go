package vet

import (
	"slices"
	"sync"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// AfterSideEffect reports a tool-chain guard with phase "after" whose
// check does not need the result, in front of a side-effecting tool.
var AfterSideEffect = &Rule{
	Name:     "guard/after-side-effect",
	Severity: dsl.Warning,
	Doc: `a phase "after" guard checks a side-effecting tool's call only once it has run.

A guard with phase: "after" runs the call first and evaluates its
predicate on the outcome: when it blocks, the result is withheld, but the
refund was already made, the email already sent, and the agent is told the
call was blocked (it may well try again). A guard whose deny or require
reads the call's arguments or the run, and not its result, could have
decided before the call: in front of a side-effecting tool it reads as a
limit and enforces none. Give it phase: "before" (the default), or scope
it with tools: to read-only tools. A guard that reads result, whose check
only the outcome allows, is not reported.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			if e.Use != "guard" || stringField(e, "phase") != "after" {
				continue
			}
			reads, ok := guardReads(e)
			if !ok || slices.Contains(reads, "result") && !slices.ContainsFunc(reads, func(v string) bool { return v != "result" && v != "tool" }) {
				continue
			}
			bad, rel := p.sideEffectingReaching(e)
			if len(bad) == 0 {
				continue
			}
			p.Reportf(e.FieldPos("phase"), rel, "%s checks side-effecting %s %s only after %s: when it blocks, the effect has already happened and only the result is withheld (the agent, told the call was blocked, may make it again); its predicate does not read result, so give it phase: \"before\" to block the call itself",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), plural(len(bad), "it has run", "they have run"))
		}
	},
}

var afterEnv = sync.OnceValues(func() (*predicate.Env, error) {
	return predicate.NewEnv(predicate.EnvConfig{Stage: predicate.Tool, Phase: predicate.After})
})

// guardReads returns the variables a guard's deny or require reads, or
// false when it does not check (compile-cel reports that).
func guardReads(e *dsl.Entry) ([]string, bool) {
	env, err := afterEnv()
	if err != nil {
		return nil, false
	}
	var reads []string
	found := false
	for _, f := range []string{"deny", "require"} {
		x := e.Expr(f)
		if x == nil {
			continue
		}
		checked, _ := env.Check(x.Source)
		if checked == nil {
			return nil, false
		}
		found = true
		reads = append(reads, checked.Reads...)
	}
	return reads, found
}
