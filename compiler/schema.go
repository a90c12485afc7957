package compiler

import (
	"github.com/agentc-dev/agentc/dsl"
)

// DefaultSchema returns the schema of the builtins plus the custom
// middlewares registered with the runtime.
func DefaultSchema() (*dsl.Schema, error) {
	return dsl.DefaultSchema()
}
