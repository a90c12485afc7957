package idempotent_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func refundCall(id, args string) rt.Response {
	return rt.Response{Stream: []runtime.Delta{{FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{ID: id, Name: "refund", Arguments: args}}}}}
}

// TestAgentTurnEndsOnAnInDoubtCall runs an agent turn whose refund is in
// doubt (an earlier execution was cancelled after it started): the turn
// ends with the *InDoubtError instead of telling the model the tool failed,
// so the model cannot try the refund again in another form ({"order_id":
// "A1 "}) that the idempotent layer would not know.
func TestAgentTurnEndsOnAnInDoubtCall(t *testing.T) {
	tool := &slowTool{delay: 50 * time.Millisecond}
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl":"300ms"}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	model := rt.NewModel(refundCall("c1", `{"order_id":"A1"}`), refundCall("c2", `{"order_id":"A1 "}`), rt.Response{Deltas: []string{"refunded"}})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn},
		Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	lctx, cancel := context.WithCancel(ctx1)
	done := make(chan error, 1)
	go func() {
		_, err := pl.Tool(lctx, req)
		done <- err
	}()
	for tool.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	res, err := pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Input: "refund A1"})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "the turn ends in doubt")
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.Equal(t, 1, model.Calls(), "the model is not asked again")
	assert.Equal(t, int64(1), tool.calls.Load(), "the refund ran once")
	last := res.Messages[len(res.Messages)-1]
	require.Equal(t, "assistant", last.Role, "the call is left unanswered for a person to settle")
	assert.Equal(t, "c1", last.ToolCalls[0].ID)

	// Run again from that transcript (a resumed run): still in doubt, and
	// neither the model nor the refund is called.
	_, err = pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Messages: res.Messages})
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, 1, model.Calls())
	assert.Equal(t, int64(1), tool.calls.Load())
}
