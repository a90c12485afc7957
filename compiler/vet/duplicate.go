package vet

import "github.com/agentc-dev/agentc/dsl"

// Duplicate reports a non-repeatable builtin used twice in one chain.
var Duplicate = &Rule{
	Name:     "order/duplicate",
	Severity: dsl.Warning,
	Doc: `a non-repeatable builtin appears twice in a chain.

Kinds that are not repeatable (meter, tracing, memoize, rate_limit, ...) do
their job once per call; a second entry does it again: a second meter keeps
a second ledger of the same spend, whose ceilings belong in the first one's
budget, a second cache or rate limit adds nothing but a second state.
Entries scoped with tools: to different tools never see the same call and
are not duplicates: that is how one limit per tool is written; in the chat
chain, entries whose when tells the models apart (request.model == 'a',
request.model == 'b') are not duplicates either. Nor are a meter or a
rate_limit whose scope differs from the other's: a budget per run beside
one per tenant, a tenant's limit beside a global one, keep ledgers or
buckets that one entry cannot.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			chain := p.Policy.Chains[stage]
			for j, e := range chain {
				if e.Kind == nil || e.Kind.Repeatable {
					continue
				}
				for i := j - 1; i >= 0; i-- {
					o := chain[i]
					if o.Use != e.Use || !p.Overlap(o, e) || keyedApart(o, e) {
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

// keyedApart reports whether two meters or two rate limits keep their
// ledgers or buckets by different scopes (run, tenant, global): one entry
// cannot do what the two do.
func keyedApart(x, y *dsl.Entry) bool {
	if x.Use != "meter" && x.Use != "rate_limit" {
		return false
	}
	sx, _ := x.Fields["scope"].(string)
	sy, _ := y.Fields["scope"].(string)
	return sx != sy
}
