package vet

import "github.com/agentc-dev/agentc/dsl"

// Duplicate reports a non-repeatable builtin used twice in one chain.
var Duplicate = &Rule{
	Name:     "order/duplicate",
	Severity: dsl.Warning,
	Doc: `a non-repeatable builtin appears twice in a chain.

Kinds that are not repeatable (meter, tracing, memoize, rate_limit, ...) do
their job once per call; a second entry doubles it: a call metered twice
spends the budget twice, a second cache or rate limit adds nothing but a
second state. Entries scoped with tools: to different tools never see the
same call and are not duplicates: that is how one limit per tool is written;
in the chat chain, entries whose when tells the models apart
(request.model == 'a', request.model == 'b') are not duplicates either.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			chain := p.Policy.Chains[stage]
			for j, e := range chain {
				if e.Kind == nil || e.Kind.Repeatable {
					continue
				}
				for i := j - 1; i >= 0; i-- {
					o := chain[i]
					if o.Use != e.Use || !p.Overlap(o, e) {
						continue
					}
					p.Reportf(e.Pos, []dsl.Related{at(o, "%s is already here", o.Ref())},
						"%s appears twice in the %s chain and is not repeatable: every call that reaches both goes through %s twice; remove one, or %s",
						e.Use, stage, e.Use, scopeApart(stage))
					break
				}
			}
		}
	},
}
