package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// RetrySideEffect reports a retry that can re-invoke a side-effecting tool
// that is not retry-safe.
var RetrySideEffect = &Rule{
	Name:     "order/retry-side-effect",
	Severity: dsl.Error,
	Doc: `a retry can re-invoke a side-effecting tool that does not declare retry_safe: true.

A retry runs the call again after a transient failure, and a transient
failure (a timeout, a dropped connection) often comes after the effect
happened: the refund was made, the email sent, and then the answer was lost.
Running it again repeats the effect. Only the tool can prevent that, by
passing the call's idempotency key downstream; retry_safe: true declares it
does. Without it the runtime does not run such a call again after a failure
that may have followed the effect, so for that tool the retry covers only
failures that prove the call did not act (refused by an inner layer, a
connection refused before the request was sent): the policy reads as
retrying the tool and does not.

The rule fires only for tools whose calls can actually reach the retry: a
retry scoped with tools: to other tools, or whose when is false for the tool,
does not fire, nor does one in a chain where a tool_policy or a guard
refuses the tool outright, nor does a retry with max_attempts: 1, which
never runs a call again. An idempotent layer does not make the retry safe,
wherever it sits: it stores only successful results and a retry follows a
failure, so the second attempt finds nothing stored and runs the tool again.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			if e.Use != "retry" || Attempts(e) <= 1 {
				// A retry of one attempt never runs the call again.
				continue
			}
			var bad []*dsl.Tool
			var rel []dsl.Related
			for _, t := range p.ToolsReaching(e) {
				if t.SideEffecting && !t.RetrySafe {
					bad = append(bad, t)
					rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared here: side_effecting, without retry_safe: true", t.Name)})
				}
			}
			if len(bad) == 0 {
				continue
			}
			n := Attempts(e)
			msg := fmt.Sprintf("%s can re-invoke side-effecting %s %s, not declared retry_safe: run again after a failure that came after the effect (a timeout, a lost answer), one call would repeat the effect up to %s times, so the runtime does not retry such a failure and %s retries %s only where the failure proves the call did not act; scope %s with tools: to other tools, or pass the idempotency key downstream and declare retry_safe: true",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), count(n), e.Ref(), plural(len(bad), "it", "them"), e.Ref())
			for _, o := range p.Policy.Chains["tool"] {
				if o.Use == "idempotent" && o.Index > e.Index && p.Overlap(o, e) {
					msg += fmt.Sprintf(" (%s inside it does not help: it stores only successes, and a retry follows a failure)", o.Ref())
					rel = append(rel, at(o, "%s is here, inside %s", o.Ref(), e.Ref()))
					break
				}
			}
			p.Reportf(e.Pos, rel, "%s", msg)
		}
	},
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
