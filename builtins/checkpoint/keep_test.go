package checkpoint_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// keepPlan is checkpointPlan with the layer's config cfg.
func keepPlan(store plan.Store, cfg string) *plan.Plan {
	p := checkpointPlan(store, false)
	p.Chains.Turn = []plan.Layer{rt.Layer("checkpoint", cfg)}
	return p
}

// TestKeepDefault: without keep a run keeps its latest 10 versions; a
// pruned one is reported as pruned, naming the versions kept, and a version
// not saved yet as absent.
func TestKeepDefault(t *testing.T) {
	pl := rt.Build(t, keepPlan(plan.Store{Kind: "memory"}, `{}`), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "long"})
	for range 12 {
		require.NoError(t, turn(ctx, t, pl))
	}
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	assert.Equal(t, runtime.DefaultCheckpointKeep, c.Keep())
	vs, err := c.Versions(ctx, "long")
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, vs)

	_, ok, err := c.At(ctx, "long", 2)
	require.ErrorIs(t, err, runtime.ErrCheckpointPruned)
	assert.False(t, ok)
	assert.EqualError(t, err, "checkpoint: run long has no version 2: checkpoint version pruned (the store keeps its latest versions only, 3 to 12)")
	three, ok, err := c.At(ctx, "long", 3)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, three.Version)
	_, ok, err = c.At(ctx, "long", 13)
	require.NoError(t, err, "a version not saved yet is absent, not pruned")
	assert.False(t, ok)
	_, ok, err = c.At(ctx, "never", 1)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestKeepAcrossResume: with keep 2 on a sqlite file a run keeps two
// versions; a new process resumes it from the latest and numbers on from
// there; the checkpointer the host asks the pipeline for saves with the
// layer's keep; finishing prunes too, and the run stays ended.
func TestKeepAcrossResume(t *testing.T) {
	store := plan.Store{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "runs.db")}
	pl := rt.Build(t, keepPlan(store, `{"keep": 2}`), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-7"})
	for i := range 5 {
		_, err := pl.AppendState(ctx, "notes", i)
		require.NoError(t, err)
		require.NoError(t, turn(ctx, t, pl))
	}
	require.NoError(t, pl.Close())

	pl = rt.Build(t, keepPlan(store, `{"keep": 2}`), runtime.Deps{})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	assert.Equal(t, 2, c.Keep(), "the host's checkpointer keeps what the layer keeps")
	vs, err := c.Versions(ctx, "case-7")
	require.NoError(t, err)
	assert.Equal(t, []int{4, 5}, vs)
	cp, err := c.Resume(ctx, "case-7")
	require.NoError(t, err)
	assert.Equal(t, 5, cp.Version)
	notes, _ := pl.GetState(ctx, "notes")
	assert.Equal(t, []any{0.0, 1.0, 2.0, 3.0, 4.0}, notes)

	require.NoError(t, turn(ctx, t, pl))
	done, err := c.Finish(ctx, runtime.RunDone)
	require.NoError(t, err)
	assert.Equal(t, 7, done.Version)
	vs, err = c.Versions(ctx, "case-7")
	require.NoError(t, err)
	assert.Equal(t, []int{6, 7}, vs)
	err = turn(ctx, t, pl)
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 7, te.Version)
}

// TestKeepAll: keep 0 keeps every version, and a host's checkpointer can
// keep fewer (WithKeep).
func TestKeepAll(t *testing.T) {
	pl := rt.Build(t, keepPlan(plan.Store{Kind: "memory"}, `{"keep": 0}`), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for range 12 {
		require.NoError(t, turn(ctx, t, pl))
	}
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Len(t, vs, 12)
	assert.Equal(t, 1, vs[0])

	one := c.WithKeep(1)
	assert.Equal(t, 1, one.Keep())
	assert.Equal(t, 0, c.Keep(), "WithKeep leaves the checkpointer it was called on")
	_, err = c.Resume(ctx, "r")
	require.NoError(t, err)
	_, err = one.Save(ctx)
	require.NoError(t, err)
	vs, err = c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{13}, vs)
}

// TestKeepNegative: a negative keep fails the build.
func TestKeepNegative(t *testing.T) {
	_, err := runtime.Build(context.Background(), keepPlan(plan.Store{Kind: "memory"}, `{"keep": -1}`), runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "keep must be 0 (every version) or more, got -1")
}
