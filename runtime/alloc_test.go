package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

var staticResult any = "done"

func staticTool(context.Context, *runtime.ToolCall) (any, error) { return staticResult, nil }

// TestHotPathsDoNotAllocate pins the allocation design: a chain of
// pass-through tool layers allocates one object per call the host makes,
// the context its tool runs with, which carries a node that an agent turn
// or an own call the tool runs marks, for the call (ToolCall.Delegated; it
// cannot be pooled, as a tool may keep its context after it returned), and
// the happy path of fallback and retry with a breaker allocates only the
// model-facing yield of the one model invocation (see emitToken: it cannot
// be pooled, since a late yield must not reach a recycled call).
func TestHotPathsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for _, n := range []int{0, 1, 6} {
		var layers []plan.Layer
		for range n {
			layers = append(layers, rt.Layer("test.pass", ""))
		}
		pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: layers}),
			runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": staticTool}})
		require.NoError(t, err)
		req := runtime.ToolRequest{Name: "t", Args: map[string]any{"a": 1.0}}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := pl.Tool(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		assert.LessOrEqual(t, allocs, 1.0, "%d pass-through layers: the tool's context", n)
	}

	pl := resilience(t, oneDelta)
	req := runtime.ChatRequest{Model: "primary", Messages: hi}
	yield := func(runtime.Delta) bool { return true }
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := pl.Stream(ctx, req, yield); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0, "resilience chain: one yield per model invocation")
}
