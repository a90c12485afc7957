package idempotent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestAClaimThatDoesNotDecodeIsInDoubt: in a store that keeps claims as
// key-value records (a sqlite file, a memory store), a record of the call's
// key that does not decode (written by another build, or damaged) may be
// the claim of a call that ran: the call is in doubt, not run as if the key
// were free. A retry_safe tool runs again under the same key.
func TestAClaimThatDoesNotDecodeIsInDoubt(t *testing.T) {
	for _, retrySafe := range []bool{false, true} {
		kv := runtime.NewMemoryKV()
		p := toolPlan()
		p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: retrySafe}}
		tool := rt.NewTool(rt.ToolResult{Value: "R1"})
		pl := rt.Build(t, p, runtime.Deps{Stores: map[string]runtime.KV{runtime.DefaultStore: kv},
			Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
		args := map[string]any{"order_id": "A1"}
		key := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}})
		require.NoError(t, kv.Set(context.Background(), key, []byte(`{"state":"doubt","token":7}`), 0))

		_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
		if retrySafe {
			require.NoError(t, err)
			assert.Equal(t, 1, tool.Calls())
			continue
		}
		var doubt *runtime.InDoubtError
		require.True(t, errors.As(err, &doubt), "%v", err)
		assert.Zero(t, tool.Calls(), "not run as if the key were free")
	}
}

// TestAClaimWhoseNoteDoesNotDecodeSaysWhyARetrySafeCallIsInDoubt: under
// key_args, a retry_safe refund takes a claim in doubt over only for the
// arguments of the call that made it, which the claim's note holds. A
// note that does not decode leaves the call in doubt, and the error said
// an execution stopped and the tool was not retry_safe: the second is
// false. It says the note is unreadable, so whether the claim was made by
// a call of these arguments cannot be told.
func TestAClaimWhoseNoteDoesNotDecodeSaysWhyARetrySafeCallIsInDoubt(t *testing.T) {
	kv := runtime.NewMemoryKV()
	p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, p, runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	key := idempotent.PlainHashKey("args", "refund", "", `["A1"]`)
	require.NoError(t, kv.Set(context.Background(), key, []byte(`{"state":"pending","token":7,"until":1,"note":"eHg="}`), 0))

	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 5}})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Zero(t, tool.Calls(), "not run under a claim it cannot compare")
	assert.NotEmpty(t, doubt.IdempotencyKey)
	assert.NotContains(t, err.Error(), "not retry_safe")
	assert.Contains(t, err.Error(), "note")
}
