package checkpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// takenOver runs an agent turn of runID whose refund another process
// resumes the run during, and then does meanwhile what meanwhile does with
// its checkpointer, and checks that the turn ends in doubt. It returns the
// pipeline, the store counting the saves this process tried and the turn's
// error.
func takenOver(t *testing.T, runID string, meanwhile func(ctx context.Context, other *runtime.Checkpointer) error) (*runtime.Pipeline, *countingStore, error) {
	store := runtime.NewMemoryCheckpoints()
	mine := &countingStore{CheckpointStore: store}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runID})
	var other *runtime.Checkpointer
	refunds := 0
	model := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
	pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: mine,
		Tools: map[string]runtime.ToolFunc{"refund": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			refunds++
			// Another replica takes the run over meanwhile.
			_, err := other.Resume(ctx, runID)
			require.NoError(t, err)
			require.NoError(t, meanwhile(ctx, other))
			return "refunded", nil
		}}})
	otherPl := rt.Build(t, agentPlan(), runtime.Deps{Checkpoints: store})
	var err error
	other, err = otherPl.Checkpointer("")
	require.NoError(t, err)

	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.Error(t, err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "the refund was made: %v", err)
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
	assert.True(t, runtime.Classify(err).Final())
	assert.Equal(t, "checkpoint", runtime.LayerOf(err))
	assert.False(t, runtime.DidNotRun(err))
	assert.Equal(t, 1, refunds)
	assert.Equal(t, 1, model.Calls(), "the model is not told the refund failed or was refused")
	assert.NotContains(t, err.Error(), "blocked", "the refund was not refused")
	return pl, mine, err
}

// TestARunTakenOverWhileItsToolRanIsInDoubt: another process resumes the
// run and saves it while this one's refund runs, so the save of the
// refund's result is refused (a *runtime.CheckpointConflictError). The
// refund was made: the turn's error was classified blocked, which tells a
// worker (and a client) that nothing happened, so that the job may be sent
// again under a new id and refund twice. It is in doubt, of the layer,
// final. The process no longer holds the run until it resumes it: then its
// saves go through again.
func TestARunTakenOverWhileItsToolRanIsInDoubt(t *testing.T) {
	pl, _, err := takenOver(t, "case-3", func(ctx context.Context, other *runtime.Checkpointer) error {
		_, err := other.Save(ctx)
		return err
	})
	var ce *runtime.CheckpointConflictError
	require.ErrorAs(t, err, &ce)

	// Resumed, the run is this process's again.
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-3"})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Resume(ctx, "case-3")
	require.NoError(t, err)
	v, err := c.Save(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, v.Version)
}

// TestARunFinishedElsewhereWhileItsToolRanIsInDoubt: another process takes
// the run over while this one's refund runs and finishes it (an operator
// cancels it), so the save of the refund's result is refused for a run
// that ended (a *runtime.TerminalRunError). The refund was made: the turn
// ends in doubt, the model is not told the refund was refused (it would
// make it again), and the turn's end tries no save of a run that ended
// elsewhere.
func TestARunFinishedElsewhereWhileItsToolRanIsInDoubt(t *testing.T) {
	pl, mine, err := takenOver(t, "case-4", func(ctx context.Context, other *runtime.Checkpointer) error {
		_, err := other.Finish(ctx, runtime.RunCancelled)
		return err
	})
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, runtime.RunCancelled, te.Status)
	assert.Equal(t, 2, mine.saves, "before the tool call and after it: the turn's end saves nothing of a run ended elsewhere")

	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	cp, ok, err := c.Latest(context.Background(), "case-4")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, runtime.RunCancelled, cp.Status, "the run stays as the other process ended it")
	assert.Equal(t, 2, cp.Version)
}

// TestASecretInAToolResultAfterItRanIsInDoubt: the save after a tool result
// is refused because the result holds a secret in clear. The call ran: the
// turn ends in doubt (its outcome was not recorded), not blocked, which
// would tell that nothing ran, and the model is not told the call was
// refused.
func TestASecretInAToolResultAfterItRanIsInDoubt(t *testing.T) {
	p := agentPlan()
	p.Tools["vault"] = plan.Tool{SecretResult: true}
	model := rt.NewModel(toolCallsResponse("c1", "vault", `{}`), rt.Response{Deltas: []string{"done"}})
	calls := 0
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"vault": func(context.Context, *runtime.ToolCall) (any, error) {
			calls++
			return map[string]any{"token": "tok_8f2a91c4"}, nil
		}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-5"})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "rotate the token"})
	var se *runtime.SecretError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "the call ran: %v", err)
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
	assert.Equal(t, "checkpoint", runtime.LayerOf(err))
	assert.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.Equal(t, 1, calls)
	assert.Equal(t, 1, model.Calls(), "the model is not told the call was refused")
}
