package runtime_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRunAgentLargeStepBound: a host that gives a turn a step bound it
// never means to reach (math.MaxInt32, math.MaxInt) had the turn reserve
// room for a transcript of that many steps before the first model call: it
// ran out of memory, or panicked. The bound only bounds.
func TestRunAgentLargeStepBound(t *testing.T) {
	for _, bound := range []int{math.MaxInt32, math.MaxInt} {
		model := rt.NewModel(callTools(use("x", "echo", `{"n":1}`)), rt.Response{Deltas: []string{"done"}})
		pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Tools: map[string]runtime.ToolFunc{"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { return c.Args, nil }}})
		res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go", MaxSteps: bound, MaxParallel: bound, MaxToolCalls: bound})
		require.NoError(t, err)
		assert.Equal(t, "done", res.Output)
		assert.Equal(t, 2, res.Steps)
	}
}
