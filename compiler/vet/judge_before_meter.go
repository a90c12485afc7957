package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// JudgeBeforeMeter reports a meter outside a judge.
var JudgeBeforeMeter = &Rule{
	Name:     "order/judge-before-meter",
	Severity: dsl.Error,
	Warns:    true,
	Doc: `meter sits outside judge in the chat chain, so the judge's verdict calls are never charged.

A judge's verdict call runs through the chat chain below the judge, as a
call of its own: a meter outside the judge sees only the response it judged,
so the verdict's tokens, cost and call are never charged. With a budget this
is an error: the ceiling never counts the verdict calls, so the run spends
past it. Without one it is a warning: the ledger under-reports the run's
usage. Put meter inside judge. The rule is the
builtin constraint judge-before-meter (schemas/meter.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "judge-before-meter", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			meter, judge := v.Inner, v.Outer
			model, _ := judge.Fields["model"].(string)
			escape := "so its ledger under-reports the run's usage"
			if v.Constraint.Severity == dsl.Error {
				escape = "so their tokens and cost escape its budget"
			}
			return meter.Pos, []dsl.Related{at(judge, "%s is here, inside %s", judge.Ref(), meter.Ref())},
				fmt.Sprintf("%s sits outside %s: it never charges %s's verdict calls to %q, %s; move %s inside %s",
					meter.Ref(), judge.Ref(), judge.Ref(), model, escape, meter.Ref(), judge.Ref())
		})
	},
}
