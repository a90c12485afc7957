package compiler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The deadline covers every stage: a stage that would start after it does
// not, and the compilation ends with a diagnostic instead of a plan.
func TestDeadlineCoversEveryStage(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\n\nchains: chat: [{use: \"retry\"}]\n"), 0o644))
	start := time.Now()
	calls := 0
	now = func() time.Time {
		calls++
		if calls > 1 { // after the first stage, time has run out
			return start.Add(time.Hour)
		}
		return start
	}
	defer func() { now = time.Now }()
	c, err := Compile(context.Background(), []string{dir}, Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Nil(t, c.Plan)
	require.NotEmpty(t, c.Diagnostics)
	assert.Contains(t, c.Diagnostics[0].String(), "compilation did not finish within 5s (stopped before")
	assert.Equal(t, []string{"load-policy"}, c.Stages)
}
