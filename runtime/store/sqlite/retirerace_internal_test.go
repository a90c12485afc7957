package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestRetireLetsNoWriteInAfterItsCheckpoint moves a store's file while a
// write waits for the store's one connection, and has a reload find the
// file moved (Spent) while the write still waits: whichever gets the
// connection first, the write that follows the checkpoint never commits
// into the write-ahead log left at the old name, which the next file at
// the path would read as its own. A write that returned nil is in the
// moved file.
func TestRetireLetsNoWriteInAfterItsCheckpoint(t *testing.T) {
	for i := range 16 {
		dir := t.TempDir()
		path := filepath.Join(dir, "audit.db")
		s, err := Open(context.Background(), path)
		require.NoError(t, err)
		rec := runtime.AuditRecord{Time: time.Unix(1, 0), Phase: runtime.PhaseIntent, RunID: "r", Tool: "refund"}
		require.NoError(t, s.Append(context.Background(), rec))
		require.NoError(t, os.Rename(path, path+".1"))

		hold, err := s.db.Conn(context.Background())
		require.NoError(t, err)
		waits := s.db.Stats().WaitCount
		wrote := make(chan error, 1)
		go func() { wrote <- s.Append(context.Background(), rec) }()
		waitFor(t, func() bool { return s.db.Stats().WaitCount > waits })
		spent := make(chan error, 1)
		go func() { spent <- s.Spent() }()
		waitFor(t, func() bool { return s.db.Stats().WaitCount > waits+1 })
		require.NoError(t, hold.Close())
		require.Error(t, <-spent, "round %d", i)
		werr := <-wrote

		fi, err := os.Stat(path + "-wal")
		if err == nil {
			require.Zero(t, fi.Size(), "round %d: a write went into the log left at the old name after the checkpoint (write: %v)", i, werr)
		}
		moved, err := Open(context.Background(), path+".1")
		require.NoError(t, err)
		recs, err := moved.Records(context.Background(), "")
		require.NoError(t, err)
		if werr == nil {
			require.Len(t, recs, 2, "round %d: every write acknowledged is in the moved file", i)
		}
		require.NotEmpty(t, recs, "round %d", i)
		require.NoError(t, moved.Close())
	}
}

// waitFor polls cond until it holds, failing the test after 5s: a goroutine
// blocked on the pool's connection shows only in its statistics.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
