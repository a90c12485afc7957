package checkpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestARunTakenOverWhileItsToolRanIsInDoubt: another process resumes the
// run and saves it while this one's refund runs, so the save of the
// refund's result is refused (a *runtime.CheckpointConflictError). The
// refund was made: the turn's error was classified blocked, which tells a
// worker (and a client) that nothing happened, so that the job may be sent
// again under a new id and refund twice. It is in doubt, of the layer,
// final. The process no longer holds the run until it resumes it: then its
// saves go through again.
func TestARunTakenOverWhileItsToolRanIsInDoubt(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-3"})
	var other *runtime.Checkpointer
	refunds := 0
	model := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
	pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"refund": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			refunds++
			// Another replica takes the run over meanwhile.
			_, err := other.Resume(ctx, "case-3")
			require.NoError(t, err)
			_, err = other.Save(ctx)
			require.NoError(t, err)
			return "refunded", nil
		}}})
	otherPl := rt.Build(t, agentPlan(), runtime.Deps{Checkpoints: store})
	var err error
	other, err = otherPl.Checkpointer("")
	require.NoError(t, err)

	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	var ce *runtime.CheckpointConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "the refund was made: %v", err)
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
	assert.True(t, runtime.Classify(err).Final())
	assert.Equal(t, "checkpoint", runtime.LayerOf(err))
	assert.Equal(t, 1, refunds)
	assert.Equal(t, 1, model.Calls(), "the model is not told the refund failed")
	assert.NotContains(t, err.Error(), "blocked", "the refund was not refused")

	// Resumed, the run is this process's again.
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Resume(ctx, "case-3")
	require.NoError(t, err)
	v, err := c.Save(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, v.Version)
}
