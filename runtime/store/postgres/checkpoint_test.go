package postgres_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func TestCheckpoints(t *testing.T) {
	s := open(t)
	storetest.Checkpoints(t, s)
}

// TestCheckpointTableFromJSONB: a checkpoint table whose data column is
// jsonb (as an earlier version created it) is converted to text on first
// use, keeping its rows; text with a NUL character saves then.
func TestCheckpointTableFromJSONB(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	schema := storetest.Prefix(t)
	_, err := s.Pool().Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema+`;
		CREATE TABLE `+schema+`.checkpoints (run_id text NOT NULL, version integer NOT NULL, time timestamptz NOT NULL,
			status text NOT NULL, data jsonb NOT NULL, PRIMARY KEY (run_id, version));
		INSERT INTO `+schema+`.checkpoints VALUES ('old', 1, now(), 'running', '{"run_id": "old", "status": "running", "fields": {"n": 1}}')`)
	require.NoError(t, err)
	old, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = old.Close()
	})
	cp, ok, err := old.LatestCheckpoint(ctx, "old")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"n": 1.0}, cp.Fields)
	var typ string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT data_type FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'checkpoints' AND column_name = 'data'`, schema).Scan(&typ))
	assert.Equal(t, "text", typ)
	v, err := old.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "old", Status: runtime.RunRunning,
		Transcript: []runtime.Message{{Role: "assistant", Content: "a\x00b"}}})
	require.NoError(t, err)
	assert.Equal(t, 2, v)
}

// Concurrent saves of one run that prune it: a save whose statement read
// the run before the others inserted and pruned it could insert a version
// they had already pruned (no conflict was left to find), reporting a
// version another save had reported and losing its checkpoint at the next
// prune; a conditional save could so succeed over a run another process had
// moved on. Saves of one run are serialised, and each reads the run as the
// last one left it.
func TestConcurrentPrunedSavesGetDistinctVersions(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	for round := range 30 {
		run := storetest.Key(t, "race-"+strconv.Itoa(round))
		const n = 24
		got := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				v, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: run, Keep: 1, Status: runtime.RunRunning, Time: time.Now(),
					Transcript: []runtime.Message{{Role: "user", Content: "turn"}}})
				assert.NoError(t, err)
				got[i] = v
			})
		}
		wg.Wait()
		slices.Sort(got)
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		require.Equal(t, want, got, "round %d: each save its own version", round)
		vs, err := s.CheckpointVersions(ctx, run)
		require.NoError(t, err)
		require.Equal(t, []int{n}, vs, "round %d: the latest kept", round)
	}
}
