package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanThatDoesNotLoadIsAUsageError: a plan file that does not load
// (truncated, an integer written 3.0) exits 2 under build -check, as a
// missing one does and as vet -baseline does, README.md's "a plan file
// that does not load"; a plan that loads and differs exits 1.
func TestPlanThatDoesNotLoadIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "pol")
	require.NoError(t, os.MkdirAll(pol, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pol, "policy.cue"), []byte("package p\nmodels: primary: {}\nchains: chat: [{use: \"retry\", max_attempts: 3}]\n"), 0o644))
	plan := filepath.Join(dir, "plan.json")
	main := func(args ...string) (int, string) {
		var stdout, stderr strings.Builder
		return Main(context.Background(), args, &stdout, &stderr), stderr.String()
	}
	code, stderr := main("build", "-o", plan, pol)
	require.Equal(t, exitOK, code, stderr)
	built, err := os.ReadFile(plan)
	require.NoError(t, err)

	for name, data := range map[string]string{
		"truncated.json": string(built[:len(built)/2]),
		"int.json":       strings.Replace(string(built), `"max_attempts": 3`, `"max_attempts": 3.0`, 1),
	} {
		require.NotEqual(t, string(built), data, name)
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, []byte(data), 0o644))
		code, stderr = main("build", "-check", file, pol)
		assert.Equal(t, exitUsage, code, "build -check %s: %s", name, stderr)
		assert.Contains(t, stderr, name)
		code, stderr = main("vet", "-baseline", file, pol)
		assert.Equal(t, exitUsage, code, "vet -baseline %s: %s", name, stderr)
	}

	edited := filepath.Join(dir, "edited.json")
	require.NoError(t, os.WriteFile(edited, []byte(strings.Replace(string(built), `"max_attempts": 3`, `"max_attempts": 4`, 1)), 0o644))
	code, stderr = main("build", "-check", edited, pol)
	assert.Equal(t, exitProblems, code, stderr)
	assert.Contains(t, stderr, "is not the plan of")
}
