package vet

import "github.com/agentc-dev/agentc/dsl"

// FailOpenSideEffect reports a fail-open guard in front of a
// side-effecting tool.
var FailOpenSideEffect = &Rule{
	Name:     "guard/fail-open-side-effect",
	Severity: dsl.Warning,
	Doc: `an on_error: "open" guard can reach a side-effecting tool.

A policy violation always blocks, but a guard's own failure (a CEL
evaluation error such as a missing argument, a detector timeout) follows its
on_error. Failing open in front of a side-effecting tool lets the call run
unchecked exactly when the check could not be made: the refund goes through,
the email goes out. Any guarding layer of the tool chain with on_error
counts (a guard, ...) but pii, whose on_error changes nothing
(guard/fail-open says so); tools scoped out of it, or refused outright, do
not.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			if e.Kind == nil || !e.Kind.Has("guards") || stringField(e, "on_error") != "open" || noFailureMode(e.Use) {
				continue
			}
			bad, rel := p.sideEffectingReaching(e)
			if len(bad) == 0 {
				continue
			}
			p.Reportf(e.FieldPos("on_error"), rel, "%s fails open: when its check cannot be evaluated, side-effecting %s %s %s unchecked; set on_error: \"closed\", or scope %s with tools: to read-only tools",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), plural(len(bad), "runs", "run"), e.Ref())
		}
	},
}
