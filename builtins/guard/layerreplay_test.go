package guard_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// An idempotent layer inside an after-phase guard answers a call made
// again in the run with the tool's failure it stored, wrapped in its own
// error. The guard's deny held on the failure's text the first time; the
// failure replayed carries the same text inside the layer's words, where
// the field cannot be read: it is the tool's answer still, and fails
// closed (it was returned as the layer's own failure, the text unread).
func TestAfterGuardBlocksAReplayedFailure(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("no_ssn", rt.Layer("guard", `{"deny":"result.ssn != ''","phase":"after"}`)),
		rt.Layer("idempotent", `{}`),
	}})
	p.Tools = map[string]plan.Tool{"lookup": {SideEffecting: true,
		ResultSchema: json.RawMessage(`{"type":"object","properties":{"ssn":{"type":"string"}}}`)}}
	tool := rt.NewTool(rt.ToolResult{Err: runtime.Ran(rt.Permanent(`{"ssn":"123-45-6789"}`))}, rt.ToolResult{Err: runtime.Ran(rt.Permanent(`{"ssn":"123-45-6789"}`))})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"lookup": tool.Func()}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	req := runtime.ToolRequest{Name: "lookup", Args: map[string]any{"id": "1"}}
	for i := range 2 {
		_, err := pl.Tool(ctx, req)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, "call %d: %v", i, err)
		assert.NotContains(t, b.Message, "123-45-6789")
	}
	assert.Equal(t, 1, tool.Calls())
}
