package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// appendN appends n intent records of run r and requires each to succeed.
func appendN(t *testing.T, s interface {
	Append(context.Context, runtime.AuditRecord) error
}, r string, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, s.Append(context.Background(), runtime.AuditRecord{Time: time.Unix(int64(i), 0),
			Phase: runtime.PhaseIntent, RunID: r, Tool: "refund"}))
	}
}

// records opens the file at path anew and returns its audit records.
func records(t *testing.T, path string) []runtime.AuditRecord {
	t.Helper()
	s := open(t, path)
	defer func() { require.NoError(t, s.Close()) }()
	recs, err := s.Records(context.Background(), "")
	require.NoError(t, err)
	return recs
}

// TestARotatedFileKeepsItsRecords moves the file of a store that wrote
// records (mv audit.db audit.db.1, as logrotate does) and closes the store
// without another write, as a graceful stop does: every record it
// acknowledged is in the moved file, none in the write-ahead log left at
// the old name, and a store opened at the path afterwards starts a new
// file that holds none of them.
func TestARotatedFileKeepsItsRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	s := open(t, path)
	appendN(t, s, "before", 3)
	require.NoError(t, os.Rename(path, path+".1"))
	require.NoError(t, s.Close())

	assert.Len(t, records(t, path+".1"), 3, "the moved file holds every acknowledged record")
	fresh := open(t, path)
	appendN(t, fresh, "after", 1)
	recs, err := fresh.Records(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "after", recs[0].RunID)
	require.NoError(t, fresh.Close())
	assert.Len(t, records(t, path+".1"), 3)
}

// TestAMoveFoundByAWriteCheckpointsIntoTheMovedFile writes after the file
// was moved: the write fails (it went to the moved file), and by then every
// record the store acknowledged is in the moved file, which another reader
// opens while the store still has it open; a crash after that loses none.
func TestAMoveFoundByAWriteCheckpointsIntoTheMovedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	s := open(t, path)
	defer s.Close()
	appendN(t, s, "before", 3)
	require.NoError(t, os.Rename(path, path+".1"))
	err := s.Append(context.Background(), runtime.AuditRecord{Time: time.Unix(9, 0), Phase: runtime.PhaseIntent, RunID: "late"})
	require.ErrorContains(t, err, "was deleted or renamed while the store had it open")
	if fi, err := os.Stat(path + "-wal"); err == nil {
		assert.Zero(t, fi.Size(), "no frame is left at the path for the next file to read as its own")
	}
	assert.ErrorContains(t, s.Set(context.Background(), "k", []byte("v"), 0), "was deleted or renamed",
		"the store takes no more writes")
	_, _, err = s.Get(context.Background(), "k")
	assert.ErrorContains(t, err, "was deleted or renamed")

	cp := filepath.Join(dir, "copy.db")
	b, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cp, b, 0o600))
	recs := records(t, cp)
	require.GreaterOrEqual(t, len(recs), 3, "a plain copy of the moved file holds the acknowledged records")
	for _, r := range recs[:3] {
		assert.Equal(t, "before", r.RunID)
	}
}
