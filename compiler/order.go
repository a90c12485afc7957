package compiler

import (
	"context"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

// checkOrder evaluates the ordering constraints (the builtins' and the
// policy's own) and runs the vet rule suite.
func checkOrder(_ context.Context, c *Compilation) error {
	if c.Policy == nil {
		return nil
	}
	c.report(vet.Check(c.Policy, c.opts.Schema.Constraints())...)
	return nil
}

// orderRules lists the rules of the check-order stage, from the vet suite.
// A rule whose severity is the constraint's own (order/<id>) is listed as
// "declared".
func orderRules() []Rule {
	var out []Rule
	for _, r := range vet.Suite {
		sev := r.Severity
		if sev == "" {
			sev = dsl.Severity("declared")
		}
		if r.Warns {
			sev += "/" + dsl.Warning
		}
		out = append(out, Rule{ID: r.Name, Severity: sev, Title: r.Title(), Doc: r.Doc})
	}
	return out
}
