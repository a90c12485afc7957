package vet

import (
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
)

// Cycle reports ordering constraints that contradict each other.
var Cycle = &Rule{
	Name:     "order/cycle",
	Severity: dsl.Error,
	Doc: `contradictory ordering constraints.

Two or more constraints, the builtins' or the policy's own, ask for orders
that no chain can satisfy at once: a outside b and b outside a, or a longer
loop. Whatever the order of the layers, one of them is broken, so the policy
does not say what it means. The diagnostic spells the cycle out
("a -> b -> a") and positions every constraint in it; the violations of those
constraints are not reported again under their own ids. Cycles are found
between the names the constraints use (before any chain holds both layers)
and between the entries of each chain, where a constraint on a builtin id
meets one on the name of an entry of it and each constraint's when is known.`,
	Run: func(p *Pass) {
		for _, cy := range p.Cycles {
			// The last constraint of the policy's own, in file order, is the
			// one that closed the loop.
			primary := -1
			for i, c := range cy.Constraints {
				if !c.Builtin && (primary < 0 || cy.Constraints[primary].Pos.Before(c.Pos)) {
					primary = i
				}
			}
			if primary < 0 {
				primary = 0
			}
			cy = cy.Rotate(primary)
			var wants []string
			var rel []dsl.Related
			for i, c := range cy.Constraints {
				wants = append(wants, fmt.Sprintf("%s wants %s outside %s", c.ID, cy.Path[i], cy.Path[i+1]))
				if i > 0 {
					rel = append(rel, dsl.Related{Pos: ConstraintPos(c), Message: describe(c)})
				}
			}
			chain := "a chain"
			if cy.Stage != "" {
				chain = "the " + cy.Stage + " chain"
			}
			p.Reportf(ConstraintPos(cy.Constraints[0]), rel, "contradictory constraints: %s (%s); no order of %s satisfies them all",
				cy, strings.Join(wants, ", "), chain)
		}
	},
}
