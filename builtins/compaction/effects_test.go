package compaction_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestSideEffectingCallsAreNeverCompactedAway compacts, with every
// strategy, a transcript whose oldest tool call made a refund: the call and
// its result reach the model however far over the budget the transcript
// is, so the model is never left to propose the refund again, while an
// equally old read-only lookup is dropped.
func TestSideEffectingCallsAreNeverCompactedAway(t *testing.T) {
	for _, cfg := range []string{
		`{"max_tokens":300,"keep_recent":2}`,
		`{"strategy":"importance","max_tokens":300,"keep_recent":2}`,
		`{"strategy":"summarize","model":"primary","max_tokens":300,"keep_recent":2}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			model := &recorder{text: "summary"}
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", cfg)}})
			p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = pl.Close() })

			msgs := []runtime.Message{
				{Role: "system", Content: "bank agent"},
				{Role: "user", Content: "refund order 7 and look up order 8"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "r1", Name: "refund", Arguments: json.RawMessage(`{"order":7}`)}}},
				{Role: "tool", ToolCallID: "r1", Name: "refund", Content: `{"refunded":7}`},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "l1", Name: "lookup", Arguments: json.RawMessage(`{"order":8}`)}}},
				{Role: "tool", ToolCallID: "l1", Name: "lookup", Content: `{"status":"shipped"}`},
			}
			for i := range 10 {
				msgs = append(msgs, runtime.Message{Role: "user", Content: long(i)}, runtime.Message{Role: "assistant", Content: long(i)})
			}
			_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
			require.NoError(t, err)
			got := model.seen[len(model.seen)-1]
			var ids []string
			for _, m := range got {
				ids = append(ids, m.ToolCallID)
				for _, c := range m.ToolCalls {
					ids = append(ids, "call:"+c.ID)
				}
			}
			assert.Contains(t, ids, "call:r1", "the refund call is kept")
			assert.Contains(t, ids, "r1", "with its result")
			assert.NotContains(t, ids, "call:l1", "an old read-only call is dropped")
			assert.Less(t, len(got), len(msgs))
			checkUnits(t, got)
		})
	}
}
