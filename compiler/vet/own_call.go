package vet

import "github.com/agentc-dev/agentc/dsl"

// OwnCaller reports whether e makes model calls of its own: a judge (its
// verdict) or a compaction with strategy "summarize" (its summary). Such a
// call runs through the chat chain below e.
func OwnCaller(e *dsl.Entry) bool {
	switch e.Use {
	case "judge":
		return true
	case "compaction":
		s, _ := e.Fields["strategy"].(string)
		return s == "summarize"
	}
	return false
}

// OwnCallRecursion reports a layer that makes its own model calls inside
// another one, unscoped.
var OwnCallRecursion = &Rule{
	Name:     "order/own-call-recursion",
	Severity: dsl.Error,
	Doc: `a judge or summarizing compaction sits, without a when, inside another one.

A judge's verdict call and a summarizing compaction's summary call run
through the chat chain below their own layer, so that the meter, retry,
fallback and tracing inside it apply to them. A second such layer below
would run on those calls too and make a model call of its own about each:
a judge judging the other judge's verdicts, or a judge judging each
summary, calls made about calls. Scope the inner layer with a when on
request.model (when: "request.model == 'primary'") to keep it off the
outer layer's calls, or keep one of the two.`,
	Run: func(p *Pass) {
		chain := p.Policy.Chains["chat"]
		for _, outer := range chain {
			if !OwnCaller(outer) {
				continue
			}
			for _, inner := range chain[outer.Index+1:] {
				if !OwnCaller(inner) || inner.When != nil {
					continue
				}
				p.Reportf(inner.Pos, []dsl.Related{at(outer, "%s is here, outside %s", outer.Ref(), inner.Ref())},
					"%s sits inside %s, whose own model calls run through the chain below it: %s would make a model call of its own about each of them; scope %s with a when on request.model, or remove one",
					inner.Ref(), outer.Ref(), inner.Ref(), inner.Ref())
			}
		}
	},
}
