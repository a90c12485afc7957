package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	return s
}

func TestSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	s := open(t, path)
	require.NoError(t, s.Set(ctx, "k", []byte("v"), 0))
	require.NoError(t, s.Set(ctx, "empty", nil, time.Hour))
	rec := runtime.AuditRecord{Time: time.Unix(100, 5), Layer: "audit", Stage: "tool", Tool: "refund",
		Phase: runtime.PhaseOutcome, Decision: runtime.DecisionFailed, ErrorType: "transient", ErrorMessage: "boom",
		Attempts: 3, RunID: "r1", IdempotencyKey: "key", Duration: 42 * time.Millisecond, ArgsDigest: "abc",
		Args: map[string]any{"amount": 5.0}}
	require.NoError(t, s.Append(ctx, runtime.AuditRecord{Phase: runtime.PhaseIntent, RunID: "r1", Time: time.Unix(99, 0)}))
	require.NoError(t, s.Append(ctx, rec))
	require.NoError(t, s.Append(ctx, runtime.AuditRecord{Phase: runtime.PhaseIntent, RunID: "r2", Time: time.Unix(101, 0)}))
	require.NoError(t, s.Close())

	s = open(t, path)
	defer s.Close()
	v, ok, err := s.Get(ctx, "k")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []byte("v"), v)
	v, ok, err = s.Get(ctx, "empty")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, v)
	recs, err := s.Records(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, runtime.PhaseIntent, recs[0].Phase)
	assert.True(t, rec.Time.Equal(recs[1].Time))
	recs[1].Time = rec.Time
	assert.Equal(t, rec, recs[1])
	all, err := s.Records(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 3)
}

func TestTTLExpiry(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "ttl.db"))
	defer s.Close()
	// The clock is stepped, not slept past: a loaded machine took longer
	// than the TTL between the first two calls.
	clock := time.Unix(1_700_000_000, 0)
	sqlite.SetNow(s, func() time.Time { return clock })
	require.NoError(t, s.Set(ctx, "short", []byte("x"), 30*time.Millisecond))
	ok, err := s.SetIfAbsent(ctx, "short", []byte("y"), 0)
	require.NoError(t, err)
	assert.False(t, ok, "live key")
	_, found, err := s.Get(ctx, "short")
	require.NoError(t, err)
	assert.True(t, found)
	clock = clock.Add(30 * time.Millisecond)
	_, found, err = s.Get(ctx, "short")
	require.NoError(t, err)
	assert.False(t, found, "expired")
	ok, err = s.SetIfAbsent(ctx, "short", []byte("z"), 0)
	require.NoError(t, err)
	assert.True(t, ok, "an expired key is replaced")
	v, _, err := s.Get(ctx, "short")
	require.NoError(t, err)
	assert.Equal(t, []byte("z"), v)
	require.NoError(t, s.Delete(ctx, "short"))
	require.NoError(t, s.Delete(ctx, "short"), "deleting a missing key is no error")
	_, found, err = s.Get(ctx, "short")
	require.NoError(t, err)
	assert.False(t, found)
}

func TestSetIfAbsentRace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "race.db")
	// Two stores on one file stand for two processes.
	a, b := open(t, path), open(t, path)
	defer a.Close()
	defer b.Close()
	for round := range 5 {
		key := fmt.Sprint("claim-", round)
		var wins atomic.Int64
		var wg sync.WaitGroup
		for i := range 16 {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Go(func() {
				ok, err := s.SetIfAbsent(ctx, key, []byte(fmt.Sprint(i)), time.Minute)
				assert.NoError(t, err)
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(1), wins.Load(), "exactly one claim wins")
	}
}

func TestRegisteredKind(t *testing.T) {
	assert.Contains(t, runtime.StoreKinds(), sqlite.Kind)
	path := filepath.Join(t.TempDir(), "kind.db")
	p := &plan.Plan{Version: plan.Version, Stores: map[string]plan.Store{"d": {Kind: "sqlite", Path: path}}}
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err, "a declared store is opened only when a layer names it")
	_, err = sqlite.Open(context.Background(), "bad?path")
	assert.Error(t, err)
}

func TestPortContracts(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)
	defer s.Close()
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, runtime.NewKVLeaser(s)) })
	t.Run("LeaserNote", func(t *testing.T) { storetest.LeaserNote(t, runtime.NewKVLeaser(s)) })
	t.Run("Audit", func(t *testing.T) { storetest.Audit(t, s, s.Records) })
}

// A file deleted or replaced while a store has it open takes the writes
// that follow with it: SQLite goes on writing to the file it holds. Each
// write then fails instead of succeeding into a file no one reads again.
func TestAFileDeletedOrReplacedWhileOpenTakesNoWrites(t *testing.T) {
	ctx := context.Background()
	rec := runtime.AuditRecord{Time: time.Unix(1, 0), Phase: runtime.PhaseIntent, RunID: "r", Tool: "refund"}
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	s := open(t, path)
	defer s.Close()
	require.NoError(t, s.Append(ctx, rec))
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		require.NoError(t, os.Remove(f))
	}
	err := s.Append(ctx, rec)
	require.Error(t, err, "the record would be lost with the deleted file")
	assert.Contains(t, err.Error(), "was deleted or renamed while the store had it open")
	assert.Error(t, s.Set(ctx, "k", []byte("v"), 0))
	_, err = s.SetIfAbsent(ctx, "claim", []byte("v"), 0)
	assert.Error(t, err, "a claim in the deleted file would let another process claim again")
	_, err = s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Time: time.Unix(1, 0), Status: runtime.RunRunning})
	assert.Error(t, err)

	other := filepath.Join(dir, "other.db")
	s2 := open(t, other)
	defer s2.Close()
	require.NoError(t, s2.Append(ctx, rec))
	fresh := open(t, filepath.Join(dir, "fresh.db"))
	require.NoError(t, fresh.Close())
	require.NoError(t, os.Rename(filepath.Join(dir, "fresh.db"), other))
	err = s2.Append(ctx, rec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was replaced while the store had it open")

	// A store opened anew writes to the file now at the path.
	s3 := open(t, path)
	defer s3.Close()
	require.NoError(t, s3.Append(ctx, rec))
	recs, err := s3.Records(ctx, "")
	require.NoError(t, err)
	assert.Len(t, recs, 1)
}
