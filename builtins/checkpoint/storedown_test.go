package checkpoint_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// downStore is a checkpoint store whose saves fail, as one that cannot be
// reached.
type downStore struct{ runtime.CheckpointStore }

func (downStore) SaveCheckpoint(context.Context, runtime.Checkpoint) (int, error) {
	return 0, errors.New("connection refused")
}

// A turn that ran, a refund included, and could not be saved is not a
// failure to deliver again: running it again would refund again. The error
// names the layer and is in doubt (final), as an audit outcome not written
// is; a turn that failed of its own keeps its own class.
func TestStoreDownAfterTheTurnRanIsInDoubt(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("runs", rt.Layer("checkpoint", `{}`))}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "refunded"})
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: downStore{runtime.NewMemoryCheckpoints()},
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

	err := turn(ctx, t, pl, "refund")
	require.Error(t, err)
	assert.Equal(t, "runs", runtime.LayerOf(err))
	assert.ErrorContains(t, err, "connection refused")
	assert.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.True(t, runtime.Classify(err).Final(), "a worker does not deliver the turn again")
	assert.Equal(t, 1, tool.Calls())

	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) {
		return "", rt.Transient("model down")
	})
	require.Error(t, err)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "a turn that failed of its own keeps its class")
}

// With after_tool, a save that fails once the refund has returned ends the
// agent turn in doubt: the model is not told the refund failed, so it does
// not make it again.
func TestStoreDownAfterAToolResultEndsTheAgentTurn(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("runs", rt.Layer("checkpoint", `{"after_tool": true}`))}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "refunded"})
	model := rt.NewModel(
		rt.Response{Stream: []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "refund", Arguments: `{}`}}, FinishReason: runtime.FinishToolCalls}}},
		rt.Response{Stream: []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c2", Name: "refund", Arguments: `{}`}}, FinishReason: runtime.FinishToolCalls}}},
		rt.Response{Deltas: []string{"done"}})
	store := &flakyStore{CheckpointStore: runtime.NewMemoryCheckpoints()}
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: store, Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.Error(t, err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.Equal(t, "runs", runtime.LayerOf(err))
	assert.Equal(t, 1, tool.Calls(), "the refund is made once")
	assert.Equal(t, 1, model.Calls(), "the model is not told the refund failed")
}

// flakyStore fails its failAt-th save alone (0: the second, the one after
// the refund returned): the store was away for a moment.
type flakyStore struct {
	runtime.CheckpointStore
	saves, failAt int
}

func (s *flakyStore) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	s.saves++
	if fail := s.failAt; s.saves == fail || fail == 0 && s.saves == 2 {
		return 0, errors.New("connection refused")
	}
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// A save that fails before the model's tool calls run ends the turn before
// any runs. The turn's end was saved with those calls unanswered, so the
// run resumed took the refund, which never ran, for one that may have:
// in doubt, for a person to settle. The calls that never ran are not in
// the transcript the turn leaves: resumed, the model is asked again and
// the refund is made once.
func TestStoreDownBeforeTheCallsRunLeavesNoCallInDoubt(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("runs", rt.Layer("checkpoint", `{"after_tool": true}`))}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "refunded"})
	model := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"done"}})
	base := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: &flakyStore{CheckpointStore: base, failAt: 1}, Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.ErrorIs(t, err, runtime.ErrStoreUnavailable)
	assert.Zero(t, tool.Calls())
	require.Len(t, res.Messages, 1, "the answer whose calls never ran is not in the transcript")
	require.NoError(t, pl.Close())

	second := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"done"}})
	res, err = resumeAgent(t, p, runtime.Deps{Checkpoints: base, Models: map[string]runtime.ModelClient{"primary": second},
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}}, "r1")
	require.NoError(t, err)
	assert.Equal(t, "done", res.Output)
	assert.Equal(t, 1, tool.Calls(), "the refund is made once")
}

// resumeAgent builds a pipeline of p over deps, as a new process would,
// resumes the run from its latest version and runs the agent turn on the
// transcript restored.
func resumeAgent(t *testing.T, p *plan.Plan, deps runtime.Deps, runID string) (runtime.AgentResult, error) {
	t.Helper()
	pl := rt.Build(t, p, deps)
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runID})
	_, err = c.Resume(ctx, runID)
	require.NoError(t, err)
	return pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
}

// An agent turn that ended well and whose save failed returned its output
// with an error saying only that the run was not saved, while the result
// said its output is empty when the turn fails. The output was made (and
// the transcript the result holds has it): the result keeps it, as the
// turn's counts, and the error says the turn ended well, its output
// returned, and was not recorded. So does a host's own turn.
func TestStoreDownAfterAnAgentTurnKeepsItsOutput(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("runs", rt.Layer("checkpoint", `{}`))}})
	model := rt.NewModel(rt.Response{Deltas: []string{"order 7 is refunded"}})
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: downStore{runtime.NewMemoryCheckpoints()},
		Models: map[string]runtime.ModelClient{"primary": model}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.Equal(t, "runs", runtime.LayerOf(err))
	assert.ErrorContains(t, err, "the turn ended well and its output is returned, but it was not recorded")
	assert.ErrorContains(t, err, "connection refused")
	assert.Equal(t, "order 7 is refunded", res.Output)
	assert.Equal(t, runtime.StopDone, res.Stop)
	assert.Equal(t, "order 7 is refunded", res.Messages[len(res.Messages)-1].Text())

	tr, err := pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) { return "ok", nil })
	require.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.ErrorContains(t, err, "the turn ended well and its output is returned, but it was not recorded")
	assert.Equal(t, "ok", tr.Output)

	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) {
		return "", rt.Transient("model down")
	})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "output is returned", "a turn that failed returns no output")
}
