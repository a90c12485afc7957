package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func fencePipeline(t *testing.T, store runtime.CheckpointStore) (*runtime.Pipeline, *runtime.Checkpointer) {
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{"n": {}}}
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"t": func(_ context.Context, c *runtime.ToolCall) (any, error) { return c.Args["i"], nil }}})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	return pl, c
}

func requireConflict(t *testing.T, err error, latest int) {
	t.Helper()
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, runtime.LayerCheckpoint, b.Layer)
	var ce *runtime.CheckpointConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, latest, ce.Latest)
}

// TestSaveIsFencedByTheVersionSeen: a save is the version after the one the
// process last saved or resumed. A process that did not resume the run, one
// that resumed it before another process took it over, and one whose run
// state was dropped (EndRun) are refused with a *CheckpointConflictError and
// write nothing, instead of saving a version that leaves out what the run
// had; after Resume, or Delete, the save goes through.
func TestSaveIsFencedByTheVersionSeen(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	a, ca := fencePipeline(t, store)
	_, err := a.SetState(ctx, "n", 1)
	require.NoError(t, err)
	_, err = ca.Save(ctx)
	require.NoError(t, err)

	b, cb := fencePipeline(t, store)
	_, err = cb.Save(ctx)
	requireConflict(t, err, 1)
	assert.ErrorContains(t, err, "did not resume it")
	_, err = cb.Resume(ctx, "r")
	require.NoError(t, err)
	_, err = b.SetState(ctx, "n", 2)
	require.NoError(t, err)
	v, err := cb.Save(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, v.Version)

	_, err = ca.Save(ctx)
	requireConflict(t, err, 2)
	assert.ErrorContains(t, err, "another process saved version 2 of it since this one saved or resumed version 1")

	b.EndRun("r")
	_, err = cb.Save(ctx)
	requireConflict(t, err, 2)
	latest, _, err := cb.Latest(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, 2, latest.Version, "nothing was written")
	assert.Equal(t, map[string]any{"n": 2.0}, latest.Fields)

	_, err = cb.Resume(ctx, "r")
	require.NoError(t, err)
	require.NoError(t, cb.Delete(ctx, "r"))
	v, err = cb.Save(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, v.Version, "after Delete the run starts again from version 1")
}

// slowFirstSave holds the first save until a second one arrives (or a
// generous deadline passes), then lets the second through first.
type slowFirstSave struct {
	runtime.CheckpointStore
	mu      sync.Mutex
	n       int
	arrived chan struct{}
	second  chan struct{}
	done    chan struct{}
}

func (s *slowFirstSave) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	switch n {
	case 1:
		close(s.arrived)
		select {
		case <-s.second:
			<-s.done
		case <-time.After(time.Second):
		}
	case 2:
		close(s.second)
		defer close(s.done)
	}
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// TestConcurrentSavesOfOneRun: two saves of one run at once in a process
// (after_tool saves after each of a step's parallel tool calls) are made
// one after the other: both are stored, and the latest holds every result
// recorded before it, never an older snapshot written last.
func TestConcurrentSavesOfOneRun(t *testing.T) {
	store := &slowFirstSave{CheckpointStore: runtime.NewMemoryCheckpoints(), arrived: make(chan struct{}), second: make(chan struct{}),
		done: make(chan struct{})}
	pl, c := fencePipeline(t, store)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t", Args: map[string]any{"i": 1}})
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() {
		_, err := c.Save(ctx)
		first <- err
	}()
	<-store.arrived
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "t", Args: map[string]any{"i": 2}})
	require.NoError(t, err)
	_, err = c.Save(ctx)
	require.NoError(t, err)
	require.NoError(t, <-first)
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, vs)
	latest, _, err := c.Latest(ctx, "r")
	require.NoError(t, err)
	assert.Len(t, latest.Tools, 2, "the latest version holds both results")
}
