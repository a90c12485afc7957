package compiler

import (
	"context"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime"
)

// validateConfigs runs each linked module's own config validation, so that
// a config the schema accepts but the middleware refuses (a zero ttl, an
// initial delay above the maximum, an invalid regular expression) is a vet
// error at the entry instead of a Build failure in production. Modules not
// linked into the running binary are skipped.
func validateConfigs(_ context.Context, c *Compilation) error {
	for _, stage := range dsl.Stages {
		for _, e := range c.Policy.Chains[stage] {
			known, err := runtime.ValidateConfig(e.Use, e.Config)
			if !known || err == nil {
				continue
			}
			msg := err.Error()
			pos := e.Pos
			// Messages name the field first ("ttl must be positive").
			if f, _, ok := strings.Cut(msg, " "); ok {
				f = strings.TrimRight(f, ":,")
				if _, has := e.Fields[f]; has {
					pos = e.FieldPos(f)
				}
			}
			c.report(dsl.Errorf(pos, "schema/invalid-value", "%s: %s", e.Ref(), msg))
		}
	}
	return nil
}
