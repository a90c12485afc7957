package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/policytest"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestPlanRoundTripBehavesAsPolicy builds each example to the plan file
// `agentc build` writes, loads it back with plan.Load as a service does,
// and runs every scenario case of the example against both: the loaded
// plan passes the same cases with the same output as the compiled policy.
func TestPlanRoundTripBehavesAsPolicy(t *testing.T) {
	ctx := context.Background()
	root := examplesDir(t)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	ran := 0
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		cases, err := policytest.Discover(ctx, dir, dsl.DataOptions{})
		if err != nil || len(cases) == 0 {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "plan.json")
			var stdout, stderr rt.LogBuffer
			code := Main(ctx, []string{"build", "-o", out, dir}, &stdout, &stderr)
			require.Equal(t, exitOK, code, stderr.String())
			loaded, err := plan.Load(out)
			require.NoError(t, err)
			c, err := compiler.Compile(ctx, []string{dir}, compiler.Options{})
			require.NoError(t, err)
			require.NotNil(t, c.Plan, "%v", c.Diagnostics)
			for _, tc := range cases {
				if tc.Scenario == nil {
					continue
				}
				ran++
				wantDiff, wantOut, wantErr := tc.Run(ctx, c.Plan, dir)
				gotDiff, gotOut, gotErr := tc.Run(ctx, loaded, dir)
				assert.Equal(t, wantErr, gotErr, tc.Name)
				assert.Equal(t, wantDiff, gotDiff, tc.Name)
				assert.Empty(t, gotDiff, tc.Name)
				assert.JSONEq(t, string(wantOut), string(gotOut), tc.Name)
			}
		})
	}
	assert.Positive(t, ran, "no example has a scenario case")
}
