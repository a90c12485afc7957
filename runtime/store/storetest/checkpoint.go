package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// Checkpoints checks the checkpoint port: dense versions from 1 per run,
// the latest and any version read back as saved, a version list, deletion,
// unique versions under concurrent saves of one run, and the pruning of a
// save with Keep (checkpointRetention).
func Checkpoints(t *testing.T, s runtime.CheckpointStore) {
	t.Run("Retention", func(t *testing.T) { checkpointRetention(t, s) })
	t.Run("Head", func(t *testing.T) { checkpointHead(t, s) })
	ctx := context.Background()
	run := Key(t, "run")
	_, ok, err := s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	assert.False(t, ok, "a run without checkpoints has no latest")
	vs, err := s.CheckpointVersions(ctx, run)
	require.NoError(t, err)
	assert.Empty(t, vs)

	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 3; i++ {
		cp := runtime.Checkpoint{RunID: run, Status: runtime.RunRunning, Time: at.Add(time.Duration(i) * time.Second),
			Transcript: []runtime.Message{{Role: "user", Content: "turn " + string(rune('0'+i))}},
			Tools:      []runtime.ToolRecord{{Tool: "lookup", Result: map[string]any{"n": float64(i)}}},
			Fields:     map[string]any{"count": float64(i), "acct": int64(9007199254740993)}}
		v, err := s.SaveCheckpoint(ctx, cp)
		require.NoError(t, err)
		assert.Equal(t, i, v, "versions count from 1")
	}
	// A conditional save is stored only as the version after the latest.
	for _, want := range []int{1, 3, 5} {
		_, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Version: want, Status: runtime.RunRunning, Time: at})
		var ce *runtime.CheckpointConflictError
		require.ErrorAs(t, err, &ce, "version %d after version 3", want)
		assert.Equal(t, runtime.CheckpointConflictError{RunID: run, Want: want, Latest: 3}, *ce)
	}
	fresh := Key(t, "fresh")
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: fresh, Version: 2, Status: runtime.RunRunning, Time: at})
	var ce *runtime.CheckpointConflictError
	require.ErrorAs(t, err, &ce, "version 2 of a run without checkpoints")
	assert.Zero(t, ce.Latest)
	vs, err = s.CheckpointVersions(ctx, fresh)
	require.NoError(t, err)
	assert.Empty(t, vs, "a refused save stores nothing")
	v, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: fresh, Version: 1, Status: runtime.RunRunning, Time: at})
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	require.NoError(t, s.DeleteCheckpoints(ctx, fresh))
	latest, ok, err := s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, latest.Version)
	assert.Equal(t, runtime.RunRunning, latest.Status)
	assert.Equal(t, "turn 3", latest.Transcript[0].Content)
	assert.Equal(t, map[string]any{"count": 3.0, "acct": int64(9007199254740993)}, latest.Fields,
		"an integer a float64 does not hold reads back as the int64 it is")
	assert.True(t, latest.Time.Equal(at.Add(3*time.Second)))

	two, ok, err := s.CheckpointAt(ctx, run, 2)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, two.Version)
	assert.Equal(t, map[string]any{"n": 2.0}, two.Tools[0].Result)
	_, ok, err = s.CheckpointAt(ctx, run, 7)
	require.NoError(t, err)
	assert.False(t, ok)

	vs, err = s.CheckpointVersions(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, vs)

	done := runtime.Checkpoint{RunID: run, Status: runtime.RunDone, Time: at}
	v, err = s.SaveCheckpoint(ctx, done)
	require.NoError(t, err)
	latest, _, err = s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, v, latest.Version)
	assert.Equal(t, runtime.RunDone, latest.Status)
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Status: runtime.RunRunning, Time: at})
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te, "a run whose latest version is terminal gets no new version")
	assert.Equal(t, runtime.TerminalRunError{RunID: run, Status: runtime.RunDone, Version: v}, *te)
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Version: v + 1, Status: runtime.RunRunning, Time: at})
	require.ErrorAs(t, err, &te, "a conditional save of a run that ended is refused as terminal")
	vs, err = s.CheckpointVersions(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4}, vs)

	nul := Key(t, "nul")
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: nul, Status: runtime.RunRunning, Time: at,
		Transcript: []runtime.Message{{Role: "assistant", Content: "a\x00b"}}})
	require.NoError(t, err, "text may hold a NUL character")
	back, ok, err := s.LatestCheckpoint(ctx, nul)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "a\x00b", back.Transcript[0].Content)
	require.NoError(t, s.DeleteCheckpoints(ctx, nul))

	other := Key(t, "other")
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: other, Status: runtime.RunRunning, Time: at})
	require.NoError(t, err)
	require.NoError(t, s.DeleteCheckpoints(ctx, run))
	vs, err = s.CheckpointVersions(ctx, run)
	require.NoError(t, err)
	assert.Empty(t, vs, "delete removes every version")
	vs, err = s.CheckpointVersions(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, []int{1}, vs, "delete keeps other runs")
	require.NoError(t, s.DeleteCheckpoints(ctx, "no such run"))

	// Concurrent saves of one run get distinct, dense versions.
	race := Key(t, "race")
	const n = 16
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: race, Status: runtime.RunRunning, Time: at})
			assert.NoError(t, err)
			got[i] = v
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, v := range got {
		assert.False(t, seen[v], "version %d saved twice", v)
		seen[v] = true
	}
	vs, err = s.CheckpointVersions(ctx, race)
	require.NoError(t, err)
	assert.Len(t, vs, n)
	assert.Equal(t, n, vs[len(vs)-1])

	// Concurrent conditional saves of one version: one is stored, the
	// others refused.
	var stored, refused atomic.Int32
	for range n {
		wg.Go(func() {
			_, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: race, Version: n + 1, Status: runtime.RunRunning, Time: at})
			var ce *runtime.CheckpointConflictError
			switch {
			case err == nil:
				stored.Add(1)
			case errors.As(err, &ce):
				refused.Add(1)
			default:
				t.Errorf("conditional save: %v", err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), stored.Load())
	assert.Equal(t, int32(n-1), refused.Load())
}

// checkpointRetention checks the saves with Keep: a run keeps its latest
// Keep versions, numbered on from the ones deleted; the pruned ones are
// absent; conditional saves, terminal refusals and deletion work as without
// pruning; Keep 0 keeps every version; other runs are untouched.
func checkpointRetention(t *testing.T, s runtime.CheckpointStore) {
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	save := func(run string, version, keep int, status runtime.RunStatus) (int, error) {
		return s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Version: version, Keep: keep, Status: status, Time: at,
			Transcript: []runtime.Message{{Role: "user", Content: "turn " + strconv.Itoa(version)}}})
	}
	versions := func(run string) []int {
		vs, err := s.CheckpointVersions(ctx, run)
		require.NoError(t, err)
		return vs
	}
	run, other := Key(t, "kept"), Key(t, "kept-other")
	for i := 1; i <= 3; i++ {
		_, err := save(other, i, 0, runtime.RunRunning)
		require.NoError(t, err)
	}
	for i := 1; i <= 5; i++ {
		v, err := save(run, i, 3, runtime.RunRunning)
		require.NoError(t, err)
		assert.Equal(t, i, v, "versions go on increasing")
		var want []int
		for w := max(1, i-2); w <= i; w++ {
			want = append(want, w)
		}
		assert.Equal(t, want, versions(run), "after version %d", i)
	}
	assert.Equal(t, []int{3, 4, 5}, versions(run), "a save with keep 3 leaves the latest 3 versions")
	assert.Equal(t, []int{1, 2, 3}, versions(other), "other runs are not pruned")
	for _, v := range []int{1, 2} {
		_, ok, err := s.CheckpointAt(ctx, run, v)
		require.NoError(t, err, "a pruned version is absent, not an error")
		assert.False(t, ok, "version %d was pruned", v)
	}
	three, ok, err := s.CheckpointAt(ctx, run, 3)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "turn 3", three.Transcript[0].Content)
	assert.Zero(t, three.Keep, "keep is not stored")
	latest, ok, err := s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 5, latest.Version)

	// Conditional saves count from the latest, not from the versions kept.
	_, err = save(run, 3, 3, runtime.RunRunning)
	var ce *runtime.CheckpointConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.CheckpointConflictError{RunID: run, Want: 3, Latest: 5}, *ce)
	assert.Equal(t, []int{3, 4, 5}, versions(run), "a refused save prunes nothing")

	// Keep 0 keeps every version; a smaller keep then prunes down to it.
	for i := 6; i <= 7; i++ {
		_, err = save(run, i, 0, runtime.RunRunning)
		require.NoError(t, err)
	}
	assert.Equal(t, []int{3, 4, 5, 6, 7}, versions(run))
	v, err := save(run, 8, 1, runtime.RunRunning)
	require.NoError(t, err)
	assert.Equal(t, 8, v)
	assert.Equal(t, []int{8}, versions(run), "keep 1 leaves the latest only")

	// A terminal save prunes too, and the run stays ended.
	v, err = save(run, 0, 2, runtime.RunDone)
	require.NoError(t, err)
	assert.Equal(t, 9, v)
	assert.Equal(t, []int{8, 9}, versions(run))
	_, err = save(run, 10, 2, runtime.RunRunning)
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, runtime.TerminalRunError{RunID: run, Status: runtime.RunDone, Version: 9}, *te)
	assert.Equal(t, []int{8, 9}, versions(run), "a refused save prunes nothing")

	// Deleting a pruned run starts it again from version 1.
	require.NoError(t, s.DeleteCheckpoints(ctx, run))
	assert.Empty(t, versions(run))
	v, err = save(run, 1, 2, runtime.RunRunning)
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	require.NoError(t, s.DeleteCheckpoints(ctx, run))
	require.NoError(t, s.DeleteCheckpoints(ctx, other))

	// Concurrent saves that prune one run: distinct versions, and the run
	// keeps the latest keep of them.
	race := Key(t, "kept-race")
	const n, keep = 16, 4
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Go(func() {
			v, err := save(race, 0, keep, runtime.RunRunning)
			assert.NoError(t, err)
			got[i] = v
		})
	}
	wg.Wait()
	slices.Sort(got)
	assert.Equal(t, n, len(slices.Compact(got)), "versions are distinct: %v", got)
	assert.Equal(t, []int{n - 3, n - 2, n - 1, n}, versions(race))
	require.NoError(t, s.DeleteCheckpoints(ctx, race))
}

// checkpointHead checks the head read of a store that has one
// (runtime.CheckpointHeads): the latest version's number and status, as
// LatestCheckpoint reads them, through a save and the run's end.
func checkpointHead(t *testing.T, s runtime.CheckpointStore) {
	h, ok := s.(runtime.CheckpointHeads)
	if !ok {
		t.Skip("the store reads no head")
	}
	ctx := context.Background()
	run := Key(t, "head")
	_, _, ok, err := h.LatestCheckpointHead(ctx, run)
	require.NoError(t, err)
	assert.False(t, ok, "a run without checkpoints has no head")
	for _, status := range []runtime.RunStatus{runtime.RunRunning, runtime.RunRunning, runtime.RunDone} {
		_, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Status: status, Time: time.Now().UTC()})
		require.NoError(t, err)
		v, st, ok, err := h.LatestCheckpointHead(ctx, run)
		require.NoError(t, err)
		require.True(t, ok)
		cp, _, err := s.LatestCheckpoint(ctx, run)
		require.NoError(t, err)
		assert.Equal(t, cp.Version, v)
		assert.Equal(t, status, st)
	}
}
