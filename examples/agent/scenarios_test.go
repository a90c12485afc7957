package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/policytest"
)

// TestScenarioCases runs the policy's scenario tests (agent_test.cue), as
// `agentc test ./examples/agent` does: the fake model scripts its tool
// calls, and the cases check the requests it received.
func TestScenarioCases(t *testing.T) {
	cases, err := policytest.Discover(t.Context(), ".", dsl.DataOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	c, err := compiler.Compile(t.Context(), []string{"."}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan, "%v", c.Diagnostics)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			diff, out, err := tc.Run(t.Context(), c.Plan, ".")
			require.NoError(t, err)
			assert.Empty(t, diff, "output: %s", out)
		})
	}
}
