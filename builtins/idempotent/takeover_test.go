package idempotent_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// inDoubtThenRetrySafe returns a pipeline on st whose refund crashes, so
// that its claim is left in doubt, and one on the other replica that
// declares refund retry_safe, so that it takes a claim in doubt over, both
// with the layer's config cfg.
func (st mismatchStore) inDoubtThenRetrySafe(t *testing.T, cfg string, calls *atomic.Int64) (crashing, retrySafe *runtime.Pipeline) {
	p := toolPlan(rt.Layer("idempotent", cfg))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	crashing = rt.Build(t, p, runtime.Deps{KV: st.a, Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
		panic("refunded, then crashed decoding the answer")
	}}})
	q := toolPlan(rt.Layer("idempotent", cfg))
	q.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: true}
	retrySafe = rt.Build(t, q, runtime.Deps{KV: st.b, Tools: map[string]runtime.ToolFunc{"refund": refunds(calls)}})
	return crashing, retrySafe
}

// TestATakeoverWithOtherArgumentsIsRefused: a claim in doubt (its call
// crashed) is taken over by a retry_safe tool only for a call with the
// claimed call's arguments, those in vary_args aside; a call with other
// arguments under its key is refused, naming them, and does not run, on
// every store. The claim stays in doubt for it, and the claimed call's
// arguments still take it over.
func TestATakeoverWithOtherArgumentsIsRefused(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			crashing, retrySafe := st.inDoubtThenRetrySafe(t, `{"key_args": ["order_id"], "vary_args": ["note"]}`, &calls)
			nine := map[string]any{"order_id": "m-1", "amount": 9, "note": "first"}
			assert.Panics(t, func() { _, _ = crashing.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: nine}) })

			r, err := retrySafe.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900, "note": "first"}})
			msg := refusedFor(t, err, r)
			assert.Contains(t, msg, "different arguments (amount)")
			assert.Contains(t, msg, "in doubt")
			assert.NotContains(t, err.Error(), "900")
			assert.Zero(t, calls.Load(), "the refund of 900 did not run under the key of the refund of 9")

			r, err = retrySafe.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9.0, "note": "again"}})
			require.NoError(t, err, "the claimed call's arguments take the claim over")
			assert.Equal(t, "refunded m-1", r.Value)
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestATakeoverOfAClaimWithoutANoteKeepsTheCallsNote: a retry_safe call
// that takes over a claim in doubt made without a note (by a build before
// notes) holds its claim with its own arguments' digests, on every store,
// so that, should it stop in doubt too, a call with other arguments does
// not take it over.
func TestATakeoverOfAClaimWithoutANoteKeepsTheCallsNote(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			nine := map[string]any{"order_id": "m-1", "amount": 9}
			layer := &idempotent.Idempotent{KeyArgs: []string{"order_id"}}
			k, ok := layer.ToolKey(&runtime.ToolCall{Name: "refund", Tool: &runtime.ToolInfo{SideEffecting: true}, Args: nine})
			require.True(t, ok)
			key := idempotent.KeyPrefix + k
			l, ctx := leaser(st.b), context.Background()
			g, err := l.Acquire(ctx, key, time.Hour, time.Hour, false)
			require.NoError(t, err)
			ok, err = l.Doubt(ctx, key, g.Token, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)

			var held runtime.LeaseGrant
			p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
			p.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			pl := rt.Build(t, p, runtime.Deps{KV: st.a, Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
				var err error
				held, err = l.AcquireAs(ctx, key, "other", nil, time.Hour, time.Hour, false)
				require.NoError(t, err)
				return "refunded", nil
			}}})
			_, err = pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: nine})
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseHeld, held.Status)
			var note struct {
				By map[string]string `json:"by"`
			}
			require.NoError(t, json.Unmarshal(held.Note, &note), "the claim taken over holds a note: %q", held.Note)
			assert.ElementsMatch(t, []string{"amount", "order_id"}, slices.Collect(maps.Keys(note.By)))
		})
	}
}
