package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/checkpoint"
	_ "github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	_ "github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// checkpointPlan checkpoints every turn (and with afterTool every tool
// result) into store, declares the secret tool vault and the state field
// notes.
func checkpointPlan(store plan.Store, afterTool bool, tool ...plan.Layer) *plan.Plan {
	cfg := `{}`
	if afterTool {
		cfg = `{"after_tool": true}`
	}
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", cfg)}, Tool: tool})
	p.Stores = map[string]plan.Store{runtime.DefaultStore: store}
	p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "lookup": {}}
	p.State = &plan.State{Fields: map[string]plan.StateField{"notes": {Schema: json.RawMessage(`{"type": "array"}`)}}}
	return p
}

func turn(ctx context.Context, t *testing.T, pl *runtime.Pipeline, tools ...string) error {
	t.Helper()
	_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(ctx context.Context) (string, error) {
		msgs := []runtime.Message{{Role: "user", Content: "go"}}
		for _, name := range tools {
			res, err := pl.Tool(ctx, runtime.ToolRequest{Name: name, Args: map[string]any{}})
			if err != nil {
				return "", err
			}
			b, _ := json.Marshal(res.Value)
			msgs = append(msgs, runtime.Message{Role: "tool", Content: string(b)})
		}
		pl.RecordTranscript(ctx, msgs)
		return "ok", nil
	})
	return err
}

// TestCrashAndResume checkpoints three turns into a sqlite file, drops the
// pipeline as a dying process would, and resumes the run in a new one from
// version 3: the next turn saves version 4.
func TestCrashAndResume(t *testing.T) {
	store := plan.Store{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "runs.db")}
	tools := map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: map[string]any{"status": "shipped"}}).Func()}
	pl := rt.Build(t, checkpointPlan(store, false), runtime.Deps{Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-7"})
	for i := range 3 {
		_, err := pl.AppendState(ctx, "notes", i)
		require.NoError(t, err)
		require.NoError(t, turn(ctx, t, pl, "lookup"))
	}
	require.NoError(t, pl.Close())

	pl = rt.Build(t, checkpointPlan(store, false), runtime.Deps{Tools: tools})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, ok := pl.GetState(ctx, "notes")
	require.False(t, ok, "a new process starts without the run's state")
	cp, err := c.Resume(ctx, "case-7")
	require.NoError(t, err)
	assert.Equal(t, 3, cp.Version)
	notes, _ := pl.GetState(ctx, "notes")
	assert.Equal(t, []any{0.0, 1.0, 2.0}, notes)
	assert.Len(t, pl.Transcript(ctx), 2)
	assert.Len(t, cp.Tools, 3)

	require.NoError(t, turn(ctx, t, pl))
	vs, err := c.Versions(ctx, "case-7")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4}, vs)
	two, ok, err := c.At(ctx, "case-7", 2)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"notes": []any{0.0, 1.0}}, two.Fields)

	// Finished, the run is refused; ResumeAll skips it and resumes others.
	_, err = c.Finish(ctx, runtime.RunDone)
	require.NoError(t, err)
	_, err = c.Resume(ctx, "case-7")
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, runtime.RunDone, te.Status)
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
	other := runtime.WithRun(context.Background(), runtime.Run{ID: "case-8"})
	require.NoError(t, turn(other, t, pl))
	resumed, skipped, err := c.ResumeAll(ctx, []string{"case-7", "case-8", "case-9"})
	require.NoError(t, err)
	require.Len(t, resumed, 1)
	assert.Equal(t, "case-8", resumed[0].RunID)
	assert.Equal(t, []string{"case-7", "case-9"}, skipped)

	require.NoError(t, c.Delete(ctx, "case-7"))
	_, err = c.Resume(ctx, "case-7")
	assert.True(t, errors.Is(err, runtime.ErrNoCheckpoint))
}

// TestSecretResultTaint: a secret tool's result refuses the save naming
// its path; behind a redact layer that masks it, the save goes through.
func TestSecretResultTaint(t *testing.T) {
	tools := func() map[string]runtime.ToolFunc {
		return map[string]runtime.ToolFunc{"vault": rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_8f2a91c4"}}).Func()}
	}
	mem := plan.Store{Kind: "memory"}
	pl := rt.Build(t, checkpointPlan(mem, false), runtime.Deps{Tools: tools()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	err := turn(ctx, t, pl, "vault")
	var se *runtime.SecretError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "tools[0].result.token", se.Path)
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Empty(t, vs, "nothing is written")

	pl = rt.Build(t, checkpointPlan(mem, false, rt.Layer("redact", `{"patterns": ["tok_[0-9a-f]+"]}`)), runtime.Deps{Tools: tools()})
	require.NoError(t, turn(ctx, t, pl, "vault"))
	c, err = pl.Checkpointer("")
	require.NoError(t, err)
	cp, ok, err := c.Latest(ctx, "r")
	require.NoError(t, err)
	require.True(t, ok)
	assert.NotContains(t, cp.Transcript[1].Content, "tok_8f2a91c4")
}

// TestAfterTool saves a version after each tool result, then one after the
// turn.
func TestAfterTool(t *testing.T) {
	tools := map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: "x"}).Func()}
	pl := rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, true), runtime.Deps{Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	require.NoError(t, turn(ctx, t, pl, "lookup", "lookup"))
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, vs)
	one, _, err := c.At(ctx, "r", 1)
	require.NoError(t, err)
	assert.Len(t, one.Tools, 1, "version 1 holds the first result only")
}

// TestTurnStatus records a blocked turn as failed and a cancelled one as
// cancelled: both are terminal. A turn in doubt keeps the run running.
func TestTurnStatus(t *testing.T) {
	pl := rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false), runtime.Deps{})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	for _, tc := range []struct {
		run  string
		err  error
		want runtime.RunStatus
	}{
		{"ok", nil, runtime.RunRunning},
		{"blocked", &runtime.BlockedError{Layer: "g", Message: "no"}, runtime.RunFailed},
		{"cancelled", context.Canceled, runtime.RunCancelled},
		{"transient", rt.Transient("flaky"), runtime.RunRunning},
		// A call in doubt keeps the run going, for a person to answer the
		// call and resume it, a cancellation beside it too.
		{"in doubt", &runtime.InDoubtError{Layer: "idem", Tool: "refund"}, runtime.RunRunning},
		{"in doubt, cancelled", errors.Join(&runtime.InDoubtError{Layer: "idem", Tool: "refund"}, context.Canceled), runtime.RunRunning},
		{"outcome unrecorded", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "audit", Err: runtime.ErrOutcomeUnrecorded}, runtime.RunRunning},
	} {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: tc.run})
		_, _ = pl.Turn(ctx, runtime.TurnRequest{}, func(context.Context) (string, error) { return "", tc.err })
		cp, ok, err := c.Latest(ctx, tc.run)
		require.NoError(t, err)
		require.True(t, ok, tc.run)
		assert.Equal(t, tc.want, cp.Status, tc.run)
	}

	// A worker that stops (a drain, a deploy) cancels its turns with the
	// cause runtime.ErrShutdown: the run is not over, another worker
	// resumes it.
	ctx, cancel := context.WithCancelCause(runtime.WithRun(context.Background(), runtime.Run{ID: "shutdown"}))
	defer cancel(nil)
	_, err = pl.Turn(ctx, runtime.TurnRequest{}, func(ctx context.Context) (string, error) {
		cancel(runtime.ErrShutdown)
		return "", ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	cp, ok, err := c.Latest(context.Background(), "shutdown")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, runtime.RunRunning, cp.Status)
	_, err = c.Resume(context.Background(), "shutdown")
	assert.NoError(t, err, "another worker resumes it")
}

// TestSecretField: a secret field without a redact handler refuses the
// save, naming the field; its value never reaches the store.
func TestSecretField(t *testing.T) {
	p := checkpointPlan(plan.Store{Kind: "memory"}, false)
	p.State.Fields["token"] = plan.StateField{Schema: json.RawMessage(`{"type": "string"}`), Secret: true}
	pl := rt.Build(t, p, runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Save(ctx)
	require.NoError(t, err, "nothing secret yet")
	_, err = pl.SetState(ctx, "token", "sk-live-0001")
	require.NoError(t, err)
	_, err = c.Save(ctx)
	var se *runtime.SecretError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "fields.token", se.Path)
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{1}, vs)
}

// countingStore counts the versions saved through it.
type countingStore struct {
	runtime.CheckpointStore
	saves int
}

func (s *countingStore) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	s.saves++
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// TestRunlessCallsAreNotCheckpointed: a turn made without a run id runs in
// a fresh run that ends with it; no one could resume it, so neither the
// turn nor its tool results are saved. The same turn in a named run is.
func TestRunlessCallsAreNotCheckpointed(t *testing.T) {
	tools := map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: "x"}).Func()}
	p := checkpointPlan(plan.Store{Kind: "memory"}, true)
	p.Stores = nil
	store := &countingStore{CheckpointStore: runtime.NewMemoryCheckpoints()}
	pl := rt.Build(t, p, runtime.Deps{Tools: tools, Checkpoints: store})
	for range 3 {
		require.NoError(t, turn(context.Background(), t, pl, "lookup"))
	}
	assert.Zero(t, store.saves, "runless turns leave no checkpoint")
	require.NoError(t, turn(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}), t, pl, "lookup"))
	assert.Equal(t, 2, store.saves, "a named run's tool result and turn are saved")
}
