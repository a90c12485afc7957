package vet

import (
	"strings"

	"github.com/agentc-dev/agentc/dsl"
)

// TracingOutermost reports a tracing layer that is not first in its chain.
var TracingOutermost = &Rule{
	Name:     "order/tracing-outermost",
	Severity: dsl.Warning,
	Doc: `tracing is not the first entry of its chain.

The span tracing opens covers only the layers inside it. Layers before it
run untraced: their time is missing from the span, and a call they refuse
(a guard trip, a budget ceiling, a rate limit) leaves no trace at all, which
is when a trace is most wanted. Put tracing first.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			chain := p.Policy.Chains[stage]
			for _, e := range chain {
				if e.Use != "tracing" || e.Index == 0 {
					continue
				}
				var before []string
				for _, o := range chain[:e.Index] {
					before = append(before, o.Ref())
				}
				first := chain[0]
				p.Reportf(e.Pos, []dsl.Related{at(first, "%s is here, outside %s", first.Ref(), e.Ref())},
					"%s is not the outermost layer of the %s chain: the time spent in %s, and the calls %s, are missing from the spans; move %s first",
					e.Ref(), stage, strings.Join(before, ", "), plural(len(before), "it refuses", "they refuse"), e.Ref())
			}
		}
	},
}
