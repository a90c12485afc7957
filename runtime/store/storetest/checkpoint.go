package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// Checkpoints checks the checkpoint port: dense versions from 1 per run,
// the latest and any version read back as saved, a version list, deletion,
// and unique versions under concurrent saves of one run.
func Checkpoints(t *testing.T, s runtime.CheckpointStore) {
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
		cp := runtime.Checkpoint{RunID: run, Version: 99, Status: runtime.RunRunning, Time: at.Add(time.Duration(i) * time.Second),
			Transcript: []runtime.Message{{Role: "user", Content: "turn " + string(rune('0'+i))}},
			Tools:      []runtime.ToolRecord{{Tool: "lookup", Result: map[string]any{"n": float64(i)}}},
			Fields:     map[string]any{"count": float64(i)}}
		v, err := s.SaveCheckpoint(ctx, cp)
		require.NoError(t, err)
		assert.Equal(t, i, v, "versions count from 1, whatever Version the caller set")
	}
	latest, ok, err := s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, latest.Version)
	assert.Equal(t, runtime.RunRunning, latest.Status)
	assert.Equal(t, "turn 3", latest.Transcript[0].Content)
	assert.Equal(t, map[string]any{"count": 3.0}, latest.Fields)
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
	v, err := s.SaveCheckpoint(ctx, done)
	require.NoError(t, err)
	latest, _, err = s.LatestCheckpoint(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, v, latest.Version)
	assert.Equal(t, runtime.RunDone, latest.Status)
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Status: runtime.RunRunning, Time: at})
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te, "a run whose latest version is terminal gets no new version")
	assert.Equal(t, runtime.TerminalRunError{RunID: run, Status: runtime.RunDone, Version: v}, *te)
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
}
