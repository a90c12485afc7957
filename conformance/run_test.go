package conformance

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all" // the standard middlewares
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// runCase runs a case's scenario against its compiled plan (after a round
// trip through the plan's JSON form, as a service would load it) and
// compares the output with the expected subset.
func runCase(t *testing.T, c *Case, comp *compiler.Compilation, dir string) {
	b, err := plan.Encode(comp.Plan)
	require.NoError(t, err)
	p, err := plan.Decode(c.Name, b)
	require.NoError(t, err)
	sc, err := scenario.Parse(c.Scenario)
	require.NoError(t, err)
	wantJSON, err := json.Marshal(c.WantRun)
	require.NoError(t, err)
	require.NoError(t, scenario.CheckWant(wantJSON))
	require.NoError(t, scenario.CheckWantNames(c.WantRun, p, sc))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, wantTrace := c.WantRun.(map[string]any)["trace"]
	res, err := scenario.Run(ctx, p, sc, scenario.Options{Dir: dir, Trace: wantTrace})
	require.NoError(t, err)
	out, err := json.Marshal(res)
	require.NoError(t, err)
	var got any
	require.NoError(t, json.Unmarshal(out, &got))
	scenario.FillFalse(c.WantRun, got)
	assert.Empty(t, Subset(c.WantRun, got, ""), "run output:\n%s", out)
}
