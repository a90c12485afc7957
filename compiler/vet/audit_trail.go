package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// AuditTrail reports an audit whose place does not give the trail it
// states.
var AuditTrail = &Rule{
	Name:     "order/audit-trail",
	Severity: dsl.Error,
	Doc: `audit and retry are ordered against the audit's trail.

Audit writes one record per invocation of its layer. With trail: "logical"
the user wants one record per logical call, which needs retry inside audit;
outside it, every failed attempt leaves a record of its own. With trail:
"attempts" the user wants one record per attempt, which needs audit inside
retry; outside it, the attempts collapse into one record. The rule is the two
builtin constraints audit-trail (schemas/audit.cue), whose when selects the
trail.`,
	Run: func(p *Pass) {
		reportConstraint(p, "audit-trail", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			audit, retry := v.Outer, v.Inner
			logical := true
			if v.Inner.Use == "audit" {
				audit, retry, logical = v.Inner, v.Outer, false
			}
			n := Attempts(retry)
			what := "a call"
			if tools := p.SharedTools(audit, retry); len(tools) > 0 {
				what = "`" + tools[0].Name + "`"
				for _, t := range tools {
					if t.SideEffecting {
						what = "`" + t.Name + "`"
						break
					}
				}
			}
			if logical {
				return audit.Pos, []dsl.Related{at(retry, "%s (max_attempts %d) is here, outside %s", retry.Ref(), n, audit.Ref())},
					fmt.Sprintf("%s failed attempts of %s would leave %s audit records; with trail: \"logical\" move %s inside %s (or set trail: \"attempts\")",
						count(n), what, count(n), retry.Ref(), audit.Ref())
			}
			return audit.Pos, []dsl.Related{at(retry, "%s (max_attempts %d) is here, inside %s", retry.Ref(), n, audit.Ref())},
				fmt.Sprintf("%s attempts of %s would leave a single audit record; with trail: \"attempts\" move %s inside %s (or set trail: \"logical\")",
					count(n), what, audit.Ref(), retry.Ref())
		})
	},
}
