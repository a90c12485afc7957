package idempotent_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestACallWithoutArgumentsDoesNotAnswerOthers: under a supplied key, the
// record of a call without arguments answers only a call without
// arguments; a call with arguments under that key is refused, on every
// store (its record is not read as one holding a single digest).
func TestACallWithoutArgumentsDoesNotAnswerOthers(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{}`, refunds(&calls))
			_, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}, IdempotencyKey: "job-9"})
			require.NoError(t, err)
			r, err := b.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-9"})
			refusedFor(t, err, r)
			r, err = b.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{}, IdempotencyKey: "job-9"})
			require.NoError(t, err, "the same call gets its outcome")
			require.True(t, r.Deduped)
			require.EqualValues(t, 1, calls.Load())
		})
	}
}
