package checkpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestResumeUnderAChangedPolicy resumes a run whose model the new
// deployment no longer has: the turn fails with an error naming the model,
// and the run stays open (running), to be resumed once the model is back,
// rather than ending as failed.
func TestResumeUnderAChangedPolicy(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"hi"}})}, Checkpoints: store})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "hello"})
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	pl = rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"other": rt.NewModel(rt.Response{Deltas: []string{"hi"}})}, Checkpoints: store})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Resume(ctx, "r")
	require.NoError(t, err)
	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx), Input: "again"})
	assert.ErrorContains(t, err, `model "primary" is not registered`)
	latest, _, err := c.Latest(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, runtime.RunRunning, latest.Status)
	_, err = c.Resume(ctx, "r")
	assert.NoError(t, err)
}

// TestSettledInDoubtCallIsKept: a run in doubt stays in doubt on every
// resume until a person answers the call; the host records the answer and
// saves it, and a worker that resumes the run afterwards goes on from the
// answer without running the refund.
func TestSettledInDoubtCallIsKept(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	refund := rt.NewTool(rt.ToolResult{Value: "refunded"})
	worker := func(model *rt.Model) (*runtime.Pipeline, *runtime.Checkpointer) {
		pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Tools: map[string]runtime.ToolFunc{"refund": refund.Func()}, Checkpoints: store})
		c, err := pl.Checkpointer("")
		require.NoError(t, err)
		_, err = c.Resume(ctx, "r")
		require.NoError(t, err)
		return pl, c
	}
	_, err := store.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning, Transcript: []runtime.Message{
		{Role: "user", Content: "refund order 7"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "refund", Arguments: []byte(`{"order":7}`)}}}}})
	require.NoError(t, err)

	model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	for range 2 {
		pl, _ := worker(model)
		_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
		var doubt *runtime.InDoubtError
		require.ErrorAs(t, err, &doubt)
	}

	pl, c := worker(model)
	answered := append(pl.Transcript(ctx), runtime.Message{Role: "tool", ToolCallID: "c1", Content: "order 7 was refunded (checked by ops)"})
	pl.RecordTranscript(ctx, answered)
	_, err = c.Save(ctx)
	require.NoError(t, err)

	pl, _ = worker(model)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Output)
	assert.Zero(t, refund.Calls(), "the refund never ran again")
	assert.Equal(t, 1, model.Calls())
}
