package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

var resumeCtx = runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})

// refundIntent returns the checkpoint an agent turn saves once the model
// asked for the refund of A1, before the refund runs: the version a worker
// killed right then leaves. A guard stands for the kill, stopping the
// refund before it is claimed in shared (a store that can say whether a
// call never started: runtime.ClaimVoucher).
func refundIntent(t *testing.T, shared runtime.StoreBackend) runtime.Checkpoint {
	t.Helper()
	killed := rt.Layer("guard", `{"deny": "tool.name == \"refund\"", "message": "killed"}`)
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)},
		Tool: []plan.Layer{killed, rt.Layer("idempotent", `{"store": "shared"}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: store, Backends: map[string]runtime.StoreBackend{"shared": shared},
		Models: map[string]runtime.ModelClient{"primary": rt.NewModel(callTools(use("c1", "refund", `{"order_id":"A1"}`)), rt.Response{Deltas: []string{"ok"}})},
		Tools:  map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "never kept", nil }}})
	_, err := pl.RunAgent(resumeCtx, runtime.AgentRequest{Model: "primary", Input: "refund A1"})
	require.NoError(t, err)
	cp, ok, err := store.CheckpointAt(context.Background(), "run-1", 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, cp.Tools, "no result yet")
	require.NotNil(t, cp.Calls, "the save records when the calls were made")
	return cp
}

// TestResumedCallInDoubtNeitherDidNotRunNorRan resumes a turn whose refund
// may have started before, in each way the resumed turn can end in doubt
// without running it now: no layer answers for it (the checkpoint's
// gate), a guard added to the policy since refuses it before a layer could
// answer, the turn no longer offers the tool, an idempotent layer finds
// its claim held. Each error is in doubt and says the call may have run
// (never runtime.DidNotRun, which would let a host send it again), and
// none is a *RanCallsError naming the refund: nothing ran now, so the
// checkpoint's and the idempotent layer's doubts agree.
func TestResumedCallInDoubtNeitherDidNotRunNorRan(t *testing.T) {
	idem := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	paused := rt.Layer("guard", `{"deny": "tool.name == \"refund\"", "message": "refunds are paused"}`)
	for _, tc := range []struct {
		name      string
		layers    []plan.Layer
		claimHeld bool
		params    runtime.ChatRequest
		layer     string
	}{
		{name: "no layer answers", layer: runtime.LayerCheckpoint},
		{name: "refused by a guard added since", layers: []plan.Layer{paused, idem}, layer: runtime.LayerCheckpoint},
		{name: "tool no longer offered", params: runtime.ChatRequest{Tools: []runtime.ToolDef{{Name: "lookup"}}}, layer: runtime.LayerCheckpoint},
		{name: "claim held at the idempotent layer", layers: []plan.Layer{idem}, claimHeld: true, layer: "idempotent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := storetest.Redis(t)
			cp := refundIntent(t, shared)
			if tc.claimHeld {
				c := &runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "A1"}, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
				g, err := shared.Acquire(context.Background(), idempotent.Key(c), 300*time.Millisecond, time.Hour, false)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseAcquired, g.Status)
			}
			p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)}, Tool: tc.layers})
			p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			store := runtime.NewMemoryCheckpoints()
			_, err := store.SaveCheckpoint(context.Background(), cp)
			require.NoError(t, err)
			model := rt.NewModel(rt.Response{Deltas: []string{"refunded"}})
			var refunds atomic.Int64
			pl := rt.Build(t, p, runtime.Deps{Checkpoints: store, Backends: map[string]runtime.StoreBackend{"shared": shared},
				Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					refunds.Add(1)
					return "R1", nil
				}}})
			cper, err := pl.Checkpointer("")
			require.NoError(t, err)
			_, err = cper.Resume(resumeCtx, "run-1")
			require.NoError(t, err)
			res, err := pl.RunAgent(resumeCtx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(resumeCtx), Params: tc.params})

			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Equal(t, tc.layer, doubt.Layer)
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
			assert.False(t, runtime.DidNotRun(err), "the refund may have run before: %v", err)
			var ran *runtime.RanCallsError
			assert.False(t, errors.As(err, &ran), "no call ran now: %v", err)
			assert.Zero(t, refunds.Load())
			assert.Zero(t, model.Calls())
			require.NotEmpty(t, res.Messages)
			assert.Equal(t, "assistant", res.Messages[len(res.Messages)-1].Role, "the call is left unanswered")
		})
	}
}

// TestToolFailingInDoubtRan: a tool that ran and failed with another
// call's *InDoubtError (a call it made itself) is a call the turn ran,
// unlike a layer's refusal in doubt: the turn's error names it.
func TestToolFailingInDoubtRan(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"settle": {SideEffecting: true}}
	model := rt.NewModel(callTools(use("s1", "settle", `{}`)), rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"settle": func(context.Context, *runtime.ToolCall) (any, error) {
			return nil, &runtime.InDoubtError{Layer: "idempotent", Tool: "transfer", IdempotencyKey: "k"}
		}}})
	_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "settle"})
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.False(t, runtime.DidNotRun(err))
	var ran *runtime.RanCallsError
	require.ErrorAs(t, err, &ran, "settle ran: %v", err)
	require.Len(t, ran.Calls, 1)
	assert.Equal(t, "settle", ran.Calls[0].Name)
}
