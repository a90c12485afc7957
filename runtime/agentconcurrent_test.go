package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestConcurrentTurnsOnOneRecordedRun: two turns of one run at once in one
// process each record the run's transcript, the later overwriting the
// earlier, so the version a checkpoint saves after one lacks the other's
// turn (a refund made, gone from the run's history). While a turn of a
// recorded run is under way, another turn of the run is refused before
// anything runs (ErrRunBusy); the first goes on, and the run takes turns
// again once it returned. The refusal proves the turn did not run (DidNotRun),
// as a call after Close does.
func TestConcurrentTurnsOnOneRecordedRun(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		calls.Add(1)
		if req.Messages[len(req.Messages)-1].Content == "first" {
			close(started)
			<-release
		}
		yield(runtime.Delta{Text: "answer to " + req.Messages[len(req.Messages)-1].Content})
		return nil
	})
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

	done := make(chan error, 1)
	go func() {
		_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "first"})
		done <- err
	}()
	<-started
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "second"})
	require.ErrorIs(t, err, runtime.ErrRunBusy)
	assert.Contains(t, err.Error(), `"r1"`)
	assert.True(t, runtime.DidNotRun(err), "the refused turn ran nothing: %v", err)
	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "third"}, func(context.Context) (string, error) { return "x", nil })
	require.ErrorIs(t, err, runtime.ErrRunBusy, "a host's own turn of the run too")
	assert.True(t, runtime.DidNotRun(err), "the refused turn ran nothing: %v", err)
	assert.Equal(t, int32(1), calls.Load(), "the refused turn made no model call")
	close(release)
	require.NoError(t, <-done)

	cp, ok, err := store.LatestCheckpoint(context.Background(), "r1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, cp.Version, "the refused turns saved nothing")
	require.Len(t, cp.Transcript, 2)
	assert.Equal(t, "answer to first", cp.Transcript[1].Text())

	// The run takes turns again, continuing its transcript.
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx), Input: "second"})
	require.NoError(t, err)
	assert.Equal(t, "answer to second", res.Output)
	cp, _, err = store.LatestCheckpoint(context.Background(), "r1")
	require.NoError(t, err)
	assert.Len(t, cp.Transcript, 4)

	// Runs other than the busy one, and turns of a pipeline that records
	// nothing, are not held.
	free := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, err = free.Turn(ctx, runtime.TurnRequest{}, func(ctx context.Context) (string, error) {
		r, err := free.Turn(ctx, runtime.TurnRequest{}, func(context.Context) (string, error) { return "", nil })
		return r.Output, err
	})
	require.NoError(t, err)
}

// TestNestedTurnOfABusyRun: a turn run inside a turn of the same run (a
// scenario's turn step around an agent step) is the same turn, not a
// concurrent one.
func TestNestedTurnOfABusyRun(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"inner"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(ctx context.Context) (string, error) {
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "go"})
		return res.Output, err
	})
	require.NoError(t, err)
	assert.Equal(t, "inner", res.Output)
}

// TestNestedAgentTurnRefusedByTheOuterTurn: an agent turn run in the body
// of a turn of the same run (a scenario's turn step around an agent step)
// runs the turn chain twice, nested. The outer chain's refusal withheld
// nothing: the run's recorded transcript, and the checkpoint saved after
// the outer turn, held the text it refused; nor did the outer chain read
// the text the agent's earlier answers wrote. Both now as for the agent's
// own turn chain.
func TestNestedAgentTurnRefusedByTheOuterTurn(t *testing.T) {
	guard := rt.Layer("guard", `{"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")","phase":"after"}`)
	calling := runtime.Delta{Text: "acct 1234: checking", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "echo", Arguments: `{}`}}}
	for name, responses := range map[string][]rt.Response{
		"output":         {{Deltas: []string{"your acct 1234 is open"}}},
		"earlier answer": {{Stream: []runtime.Delta{calling}}, {Deltas: []string{"all fine"}}},
	} {
		t.Run(name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), guard}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(responses...)}, Checkpoints: store,
					Tools: map[string]runtime.ToolFunc{"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			var inner runtime.AgentResult
			_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
				var err error
				inner, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "inner"})
				return inner.Output, err
			})
			require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
			require.NotEmpty(t, inner.Output, "the inner chain let it through")
			assertNotRecorded(t, ctx, pl, store, "acct 1234")
		})
	}
}
