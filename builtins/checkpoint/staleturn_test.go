package checkpoint_test

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

// replica is one process's pipeline over its own connection to the shared
// checkpoint store: its model (counted) proposes a refund of order 7.
type replica struct {
	pl      *runtime.Pipeline
	cp      *runtime.Checkpointer
	calls   atomic.Int32
	refunds atomic.Int32
}

func newReplica(t *testing.T, store runtime.CheckpointStore, afterTool bool) *replica {
	r := &replica{}
	scripted := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		r.calls.Add(1)
		return scripted.Stream(ctx, req, yield)
	})
	cfg := `{}`
	if afterTool {
		cfg = `{"after_tool": true}`
	}
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", cfg)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	r.pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			r.refunds.Add(1)
			return map[string]any{"refunded": c.Args["order"]}, nil
		}}})
	var err error
	r.cp, err = r.pl.Checkpointer("")
	require.NoError(t, err)
	return r
}

// TestAStaleTurnIsRefusedBeforeTheModelIsCalled: two replicas resume one
// run; the other one then finishes it, or saves it (its state is ahead of
// this one's). This replica's next turn (an agent turn, or a host's turn)
// is refused before the model is called and before any tool runs, with
// the refusal a save of it would get (a *runtime.BlockedError of layer
// checkpoint wrapping a *runtime.TerminalRunError, or a
// *runtime.CheckpointConflictError): nothing ran, so nothing is in doubt.
// Without after_tool the turn's first save is at its end, after its refund
// ran: checked only then, the refund was made twice.
func TestAStaleTurnIsRefusedBeforeTheModelIsCalled(t *testing.T) {
	stores := twoProcesses(t)
	stores["memory"] = func(*testing.T) (runtime.CheckpointStore, runtime.CheckpointStore) {
		s := runtime.NewMemoryCheckpoints()
		return s, s
	}
	for sname, open := range stores {
		for _, afterTool := range []bool{false, true} {
			for _, other := range []string{"finished", "ahead"} {
				for _, host := range []bool{false, true} {
					name := sname + "/" + other
					if afterTool {
						name += "/after_tool"
					}
					if host {
						name += "/host turn"
					}
					t.Run(name, func(t *testing.T) {
						sa, sb := open(t)
						runID := "case-" + other
						ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runID})
						a, b := newReplica(t, sa, afterTool), newReplica(t, sb, afterTool)
						a.pl.RecordTranscript(ctx, []runtime.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}})
						_, err := a.cp.Save(ctx)
						require.NoError(t, err)
						_, err = b.cp.Resume(ctx, runID)
						require.NoError(t, err)
						if other == "finished" {
							_, err = b.cp.Finish(ctx, runtime.RunDone)
						} else {
							_, err = b.cp.Save(ctx)
						}
						require.NoError(t, err)
						before, _, err := b.cp.Latest(ctx, runID)
						require.NoError(t, err)

						bodyRan := false
						if host {
							_, err = a.pl.Turn(ctx, runtime.TurnRequest{Input: "refund order 7"}, func(ctx context.Context) (string, error) {
								bodyRan = true
								return "", nil
							})
						} else {
							_, err = a.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: a.pl.Transcript(ctx), Input: "refund order 7"})
						}
						require.Error(t, err)
						assert.Zero(t, a.calls.Load(), "the model is not called")
						assert.Zero(t, a.refunds.Load(), "the refund is not made")
						assert.False(t, bodyRan, "the host's turn body does not run")
						var be *runtime.BlockedError
						require.ErrorAs(t, err, &be, "nothing ran: blocked, not in doubt")
						assert.Equal(t, "checkpoint", be.Layer)
						assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
						assert.NotErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
						if other == "finished" {
							var te *runtime.TerminalRunError
							require.ErrorAs(t, err, &te)
							assert.Equal(t, runtime.RunDone, te.Status)
							assert.Equal(t, before.Version, te.Version)
						} else {
							var ce *runtime.CheckpointConflictError
							require.ErrorAs(t, err, &ce)
							assert.Equal(t, runID, ce.RunID)
							assert.Equal(t, before.Version, ce.Latest)
							assert.ErrorContains(t, err, "another process saved version")
						}
						after, _, err := b.cp.Latest(ctx, runID)
						require.NoError(t, err)
						assert.Equal(t, before.Version, after.Version, "nothing is saved")
						assert.Equal(t, before.Status, after.Status)
					})
				}
			}
		}
	}
}

// TestATurnOfTheRunItHoldsIsNotRefused: the check before the turn lets
// through a run this process holds (resumed, or saved by it last) and a run
// without versions, and its saves go on as before.
func TestATurnOfTheRunItHoldsIsNotRefused(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	r := newReplica(t, store, true)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "fresh"})
	_, err := r.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, int32(2), r.calls.Load())
	assert.Equal(t, int32(1), r.refunds.Load())
	latest, ok, err := r.cp.Latest(ctx, "fresh")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, latest.Version, "before the refund, after it, after the turn")

	// Another replica resumes it and runs a turn of the run it now holds.
	other := newReplica(t, store, true)
	_, err = other.cp.Resume(ctx, "fresh")
	require.NoError(t, err)
	_, err = other.pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) { return "ok", nil })
	require.NoError(t, err)
	latest, _, err = other.cp.Latest(ctx, "fresh")
	require.NoError(t, err)
	assert.Equal(t, 4, latest.Version)
}
