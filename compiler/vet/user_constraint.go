package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// UserConstraint reports the violations of the policy's own constraints and
// of those a registered custom middleware ships, each under the rule id
// order/<its id>.
var UserConstraint = &Rule{
	Name: "order/<id>",
	Doc: `a constraint of the policy is violated.

The policy's constraints say which layer must sit outside which, with the
reason (why) shown to whoever breaks them. They are checked by the same
checker as the builtins' constraints: both layers must be in one chain (and
in the constraint's stage, if it names one), able to see the same call, and
the constraint's when must hold for their configs. The diagnostic carries
the rule id order/<id> and the constraint's severity.`,
	Run: func(p *Pass) {
		for _, v := range p.Pairs {
			c := v.Constraint
			if c.Builtin || !v.Violated() {
				continue
			}
			msg := fmt.Sprintf("%s sits outside %s, but constraint %s wants %s outside %s: %s", v.Inner.Ref(), v.Outer.Ref(), c.ID, c.Outer, c.Inner, c.Why)
			if c.Module != "" {
				msg += fmt.Sprintf(" (a constraint of middleware %s)", c.Module)
			}
			if v.WhenErr != nil {
				msg += " (when could not be evaluated: " + v.WhenErr.Error() + ")"
			}
			related := []dsl.Related{at(v.Outer, "%s is here, inside %s", v.Outer.Ref(), v.Inner.Ref())}
			if c.Pos.IsValid() {
				related = append(related, dsl.Related{Pos: c.Pos, Message: "constraint " + c.ID + " is declared here"})
			}
			p.Report(dsl.Diagnostic{
				Pos:      v.Inner.Pos,
				Severity: c.Severity,
				Rule:     "order/" + c.ID,
				Message:  msg,
				Related:  related,
			})
		}
	},
}
