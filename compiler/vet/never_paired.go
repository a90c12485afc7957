package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// NeverPaired reports a constraint of the policy whose outer and inner
// designate layers of the policy that never wrap the same call.
var NeverPaired = &Rule{
	Name:     "order/never-paired",
	Severity: dsl.Warning,
	Doc: `a constraint of the policy whose outer and inner never share a chain.

A constraint orders two layers that wrap the same call: both must sit in
one chain (the constraint's stage, when it names one) and, in the tool
chain, apply to a common tool. When the policy holds layers of both names
but never together (redact in the chat chain and audit in the tool chain,
two tool-chain layers scoped with tools: to different tools, a constraint
for the tool chain whose layers sit in the chat chain), the constraint
checks nothing, while it reads as an ordering the policy enforces. Move the
layers into one chain, give the constraint the stage that holds both, or
remove it. A constraint naming a builtin the policy does not use at all is
a standing rule for later edits and is not reported.`,
	Run: func(p *Pass) {
		for _, c := range p.Policy.Constraints {
			if c.Builtin || c.Module != "" {
				continue
			}
			var outers, inners []*dsl.Entry
			for _, stage := range dsl.Stages {
				for _, e := range p.Policy.Chains[stage] {
					if matches(e, c, c.Outer) {
						outers = append(outers, e)
					}
					if matches(e, c, c.Inner) {
						inners = append(inners, e)
					}
				}
			}
			if len(outers) == 0 || len(inners) == 0 || p.paired(c, outers, inners) {
				continue
			}
			var rel []dsl.Related
			for _, e := range outers {
				rel = append(rel, at(e, "%s (outer) is here, in the %s chain%s", e.Ref(), e.Stage, scopeNote(e)))
			}
			for _, e := range inners {
				rel = append(rel, at(e, "%s (inner) is here, in the %s chain%s", e.Ref(), e.Stage, scopeNote(e)))
			}
			where := "one chain"
			if c.Stage != "" {
				where = "the " + c.Stage + " chain"
			}
			p.Report(dsl.Diagnostic{Pos: c.Pos, Related: rel,
				Message: fmt.Sprintf("constraint %s orders %s outside %s, but no call goes through both: %s never holds them together%s, so the constraint checks nothing; move them into one chain, or remove the constraint",
					c.ID, c.Outer, c.Inner, where, toolScoped(outers, inners))})
		}
	},
}

// paired reports whether some outer and inner entry of c sit in one chain
// of its stage and can see the same call.
func (a *Analysis) paired(c *dsl.Constraint, outers, inners []*dsl.Entry) bool {
	for _, o := range outers {
		for _, i := range inners {
			if o != i && o.Stage == i.Stage && (c.Stage == "" || c.Stage == o.Stage) && a.Overlap(o, i) {
				return true
			}
		}
	}
	return false
}

// scopeNote names the tools an entry is scoped to, for related lines.
func scopeNote(e *dsl.Entry) string {
	if len(e.Tools) == 0 {
		return ""
	}
	return fmt.Sprintf(", scoped to %v", e.Tools)
}

// toolScoped explains a tool-chain pair that exists but sees no common call.
func toolScoped(outers, inners []*dsl.Entry) string {
	for _, o := range outers {
		for _, i := range inners {
			if o != i && o.Stage == "tool" && i.Stage == "tool" {
				return " (in the tool chain they apply to no common tool)"
			}
		}
	}
	return ""
}
