package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func TestCheckpoints(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "cp.db"))
	defer s.Close()
	storetest.Checkpoints(t, s)
}

// TestCheckpointsSurviveReopen saves versions, closes the file as a process
// that dies would, and reads them back from a new handle.
func TestCheckpointsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.db")
	s := open(t, path)
	for range 3 {
		_, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning, Fields: map[string]any{"k": "v"}})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s = open(t, path)
	defer s.Close()
	cp, ok, err := s.LatestCheckpoint(ctx, "r")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, cp.Version)
	assert.Equal(t, map[string]any{"k": "v"}, cp.Fields)
	v, err := s.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunDone})
	require.NoError(t, err)
	assert.Equal(t, 4, v, "numbering continues after a reopen")
}

// TestSaveAfterTerminalRefused: once the run's latest version is terminal,
// the store saves no new version of it, from any handle on the file.
func TestSaveAfterTerminalRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.db")
	a, b := open(t, path), open(t, path)
	defer a.Close()
	defer b.Close()
	_, err := a.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning})
	require.NoError(t, err)
	v, err := a.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunFailed})
	require.NoError(t, err)
	assert.Equal(t, 2, v)
	_, err = b.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning})
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, runtime.TerminalRunError{RunID: "r", Status: runtime.RunFailed, Version: 2}, *te)
	vs, err := a.CheckpointVersions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, vs)
	_, err = b.SaveCheckpoint(ctx, runtime.Checkpoint{RunID: "other", Status: runtime.RunRunning})
	assert.NoError(t, err, "other runs are not concerned")
}
