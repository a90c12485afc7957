package vet

import (
	"reflect"
	"strings"
	"time"

	"github.com/agentc-dev/agentc/dsl"
)

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
(request.model == 'a', request.model == 'b') are not duplicates either, and
in any chain neither are entries whose whens each require one value of the
run to equal a different constant (run.meta.?tenant.orValue('') == 'alpha',
run.meta.?tenant.orValue('') == 'gamma': the tenant's key picks one; the
value must be run.id, run.agent or a key of run.meta read with .? and
orValue, which never fail: a when that fails applies its layer). Nor
are entries that differ in a field the kind keeps separate state by (its
distinct_by: a meter's scope, window and store; a rate_limit's scope, per,
store and limiter), since each does its own job: a per-tenant daily budget
beside a per-run one is two budgets, a burst limit per second beside a
sustained one per hour two limits.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			chain := p.Policy.Chains[stage]
			for j, e := range chain {
				if e.Kind == nil || e.Kind.Repeatable {
					continue
				}
				for i := j - 1; i >= 0; i-- {
					o := chain[i]
					if o.Use != e.Use || distinct(o, e) || whensApart(o, e) || !p.Overlap(o, e) {
						continue
					}
					p.Reportf(e.Pos, []dsl.Related{at(o, "%s is already here", o.Ref())},
						"%s appears twice in the %s chain and is not repeatable: every call that reaches both goes through %s twice; remove one, or %s, or with whens to different values of the run (run.meta.?tenant.orValue('') == 'a', == 'b')%s",
						e.Use, stage, e.Use, scopeApart(stage), distinctApart(e.Kind))
					break
				}
			}
		}
	},
}

// distinct reports whether two entries of one kind differ in a field of
// its DistinctBy (defaults applied; a field set in one and not in the
// other differs; one duration written two ways, "60s" and "1m", does
// not): each then keeps its own state.
func distinct(a, b *dsl.Entry) bool {
	for _, f := range a.Kind.DistinctBy {
		x, y := a.Fields[f], b.Fields[f]
		if dx, ok := duration(x); ok {
			if dy, ok := duration(y); ok && dx == dy {
				continue
			}
		}
		if !reflect.DeepEqual(x, y) {
			return true
		}
	}
	return false
}

// duration reads v as a duration string ("1m", "24h").
func duration(v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// distinctApart is the advice to tell two entries of kind apart by its
// DistinctBy ("" when it has none).
func distinctApart(kind *dsl.Kind) string {
	fs := kind.DistinctBy
	switch len(fs) {
	case 0:
		return ""
	case 1:
		return ", or give them a different " + fs[0]
	}
	return ", or give them a different " + strings.Join(fs[:len(fs)-1], ", ") + " or " + fs[len(fs)-1]
}
