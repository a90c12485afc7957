package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/audit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
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

// TestAReloadOpensAFileMovedUnderThePool: a pipeline built again with the
// StorePool of the one whose trail file was moved (a reload after
// logrotate's mv) opens the file now at the path rather than sharing the
// store that let go of the moved one; closing the old pipeline leaves the
// new store open.
func TestAReloadOpensAFileMovedUnderThePool(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"sink": "trail"}`)}})
	p.Stores = map[string]plan.Store{"trail": {Kind: sqlite.Kind, Path: path}}
	p.Tools = map[string]plan.Tool{"lookup": {}}
	pool := runtime.NewStorePool()
	build := func() *runtime.Pipeline {
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{StorePool: pool,
			Tools: map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: "ok"}).Func()}})
		require.NoError(t, err)
		return pl
	}
	call := func(pl *runtime.Pipeline) error {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
		return err
	}
	old := build()
	require.NoError(t, call(old))
	require.NoError(t, os.Rename(path, path+".1"))
	require.Error(t, call(old), "the moved file takes no more records")

	next := build()
	require.NoError(t, call(next), "the reload opened the file now at the path")
	require.NoError(t, old.Close())
	require.NoError(t, call(next), "closing the old pipeline left the new store open")
	require.NoError(t, next.Close())
	assert.Equal(t, 0, pool.Open())

	assert.Len(t, records(t, path), 4, "two calls, intent and outcome each")
	moved := records(t, path+".1")
	require.GreaterOrEqual(t, len(moved), 2)
	assert.Equal(t, runtime.PhaseOutcome, moved[1].Phase, "the call before the move is whole in the moved file")
}
