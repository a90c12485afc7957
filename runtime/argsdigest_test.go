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

func TestArgsDigestOfArgumentsWithoutCanonicalForm(t *testing.T) {
	ok := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "alice", "amount": 1.0}}
	d, err := ok.ArgsDigestErr()
	require.NoError(t, err)
	assert.Len(t, d, 64)
	assert.Equal(t, d, ok.ArgsDigest())

	alice := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "alice", "amount": math.Inf(1)}}
	bob := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "bob", "amount": math.Inf(1)}}
	for _, c := range []*runtime.ToolCall{alice, bob} {
		d, err := c.ArgsDigestErr()
		require.Error(t, err)
		assert.Empty(t, d)
		assert.Empty(t, c.ArgsDigest())
		_, err = c.ArgsDigestErr()
		require.Error(t, err, "the failure is remembered")
	}
	assert.NotEqual(t, alice.IdempotencyKey(), bob.IdempotencyKey(), "no shared key")
	assert.Equal(t, alice.IdempotencyKey(), alice.IdempotencyKey(), "stable for the call")
}

func TestIdempotencyKeyOfArgumentsWithoutCanonicalFormIsStableAcrossRetries(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms"}`)}})
	// pay passes its idempotency key downstream: a retry may run it again.
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true, RetrySafe: true}}
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("flaky")}, rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
	require.NoError(t, err)
	defer pl.Close()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	for range 2 {
		_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"amount": math.NaN()}})
		require.NoError(t, err)
	}
	keys := tool.Keys()
	require.Len(t, keys, 3)
	assert.Equal(t, keys[0], keys[1], "the same across the call's retries")
	assert.NotEqual(t, keys[0], keys[2], "never shared with another call")
}
