package idempotent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestTheTrailNamesTheKeyPassedDownstream: with key_args, an audit outside
// the layer (the chain docs/state.md shows) records the key the tool gets
// and a duplicate in doubt names, not the one derived from the run: a
// person settling a refund in doubt looks it up at the payment provider by
// the trail's key, and under another key finds nothing and refunds again.
func TestTheTrailNamesTheKeyPassedDownstream(t *testing.T) {
	p := toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Hang: true})
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	args := map[string]any{"order_id": "A1"}

	ctx, cancel := context.WithTimeout(ctx1, 20*time.Millisecond)
	defer cancel()
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: args})
	require.Error(t, err)
	_, err = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "run-2"}), runtime.ToolRequest{Name: "refund", Args: args})
	var doubt *runtime.InDoubtError
	require.True(t, errors.As(err, &doubt), "%v", err)

	require.Len(t, tool.Keys(), 1)
	sent := tool.Keys()[0]
	assert.Equal(t, sent, doubt.IdempotencyKey, "the duplicate in doubt names the key the tool got")
	recs := sink.Records()
	require.Len(t, recs, 4)
	for _, r := range recs {
		assert.Equal(t, sent, r.IdempotencyKey, "%s %s of %s", r.Phase, r.Decision, r.RunID)
	}
	assert.Equal(t, runtime.DecisionInDoubt, recs[1].Decision)
}
