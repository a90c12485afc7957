package idempotent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
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
	refund, cut := cutOnStart(tool)
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": refund}})
	args := map[string]any{"order_id": "A1"}

	_, err := pl.Tool(cut(t, ctx1), runtime.ToolRequest{Name: "refund", Args: args})
	require.Error(t, err)
	_, err = pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: args})
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

// TestAResumedCallInDoubtNamesTheKeyPassedDownstream: a resumed turn's call
// the store cannot answer for (a memory store) ends in doubt naming the key
// the tool would have got, the layer's key_args key, not the run's.
func TestAResumedCallInDoubtNamesTheKeyPassedDownstream(t *testing.T) {
	refund := runtime.ToolUse{ID: "r1", Name: "refund", Arguments: []byte(`{"order_id":"A1"}`)}
	store := runtime.NewMemoryCheckpoints()
	_, err := store.SaveCheckpoint(context.Background(), runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning,
		Transcript: []runtime.Message{{Role: "user", Content: "refund order A1"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{refund}}}})
	require.NoError(t, err)
	p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err = cp.Resume(ctx, "r")
	require.NoError(t, err)
	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	require.Zero(t, tool.Calls())

	_, err = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "other"}),
		runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.Equal(t, tool.Keys()[0], doubt.IdempotencyKey)
}

// TestAKeyArgsLayerSkippedByItsWhenLeavesTheRunsKey: a call the layer's when
// skips is not deduplicated by it, and keeps the key derived from its run
// (the tool and the trail get that one); a call it covers gets the layer's.
func TestAKeyArgsLayerSkippedByItsWhenLeavesTheRunsKey(t *testing.T) {
	l := rt.Layer("idempotent", `{"key_args": ["order_id"]}`)
	l.When = &plan.Predicate{Stage: plan.StageTool, Source: `args.order_id == "A1"`}
	p := toolPlan(rt.Layer("audit", ""), l)
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Value: "R2"}, rt.ToolResult{Value: "R3"})
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	for _, run := range []string{"run-1", "run-2"} {
		for _, order := range []string{"A1", "B2"} {
			_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}),
				runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": order}})
			require.NoError(t, err)
		}
	}
	keys := tool.Keys()
	require.Len(t, keys, 3, "A1 once, B2 in each run")
	assert.NotEqual(t, keys[1], keys[2], "B2 keyed on its run")
	recs := sink.Records()
	require.Len(t, recs, 8)
	assert.Equal(t, keys[0], recs[0].IdempotencyKey, "A1 under the layer's key")
	assert.Equal(t, keys[1], recs[2].IdempotencyKey)
	assert.Equal(t, keys[0], recs[4].IdempotencyKey, "A1 again, replayed, under the layer's key")
	assert.Equal(t, keys[2], recs[6].IdempotencyKey)
}

// TestReplicasRecordTheKeyPassedDownstream: two replicas over one Redis
// (claims) and one PostgreSQL (trail) make the refund of one order from two
// runs; the first is cut while the tool has it, the second finds it in
// doubt. Every record of the trail, in the database, names the key the
// provider got.
func TestReplicasRecordTheKeyPassedDownstream(t *testing.T) {
	claims, trail := storetest.Redis(t), storetest.Postgres(t)
	p := toolPlan(rt.Layer("audit", `{"sink": "trail"}`), rt.Layer("idempotent", `{"store": "claims", "key_args": ["order_id"]}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Hang: true})
	refund, cut := cutOnStart(tool)
	deps := runtime.Deps{Stores: map[string]runtime.KV{"claims": claims}, AuditSinks: map[string]runtime.AuditSink{"trail": trail},
		Tools: map[string]runtime.ToolFunc{"refund": refund}}
	a, b := rt.Build(t, p, deps), rt.Build(t, p, deps)
	args := map[string]any{"order_id": "A1"}

	_, err := a.Tool(cut(t, runtime.WithRun(context.Background(), runtime.Run{ID: "run-a"})), runtime.ToolRequest{Name: "refund", Args: args})
	require.Error(t, err)
	_, err = b.Tool(bounded(t, "run-b"), runtime.ToolRequest{Name: "refund", Args: args})
	var doubt *runtime.InDoubtError
	require.True(t, errors.As(err, &doubt), "%v", err)

	require.Len(t, tool.Keys(), 1)
	recs, err := trail.Records(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, recs, 4)
	for _, r := range recs {
		assert.Equal(t, tool.Keys()[0], r.IdempotencyKey, "%s %s of %s", r.Phase, r.Decision, r.RunID)
	}
	assert.Equal(t, tool.Keys()[0], doubt.IdempotencyKey)
}

// cutOnStart wraps tool so that a context from cut is cancelled once the
// tool has started: the call is cut mid-flight, so it is in doubt, however
// long a loaded machine takes to reach the tool (a fixed timeout could end
// the call before it claimed, and the duplicate would then run).
func cutOnStart(tool *rt.Tool) (runtime.ToolFunc, func(*testing.T, context.Context) context.Context) {
	run := tool.Func()
	var cancel atomic.Pointer[context.CancelFunc]
	refund := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if f := cancel.Swap(nil); f != nil {
			(*f)()
		}
		return run(ctx, c)
	}
	cut := func(t *testing.T, parent context.Context) context.Context {
		ctx, f := context.WithCancel(parent)
		t.Cleanup(f)
		cancel.Store(&f)
		return ctx
	}
	return refund, cut
}

// bounded is a context for run id that a duplicate which wrongly ran the
// hanging tool cannot hold past a minute, so the test fails instead of
// hanging.
func bounded(t *testing.T, id string) context.Context {
	ctx, cancel := context.WithTimeout(runtime.WithRun(context.Background(), runtime.Run{ID: id}), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
