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

// A policy path that does not exist is a usage error naming it, with the
// closest name beside it when one is close (a misspelt example).
func TestMissingPathSuggestsItsNeighbour(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "examples", "support"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "examples", "support", "policy.cue"), []byte("package p\n"), 0o644))
	for _, cmd := range []string{"vet", "build", "explain", "prove", "test"} {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), []string{cmd, filepath.Join(dir, "examples", "suport")}, &stdout, &stderr)
		assert.Equal(t, exitUsage, code, cmd)
		assert.Contains(t, stderr.String(), filepath.Join(dir, "examples", "suport")+`: no such file or directory; did you mean "`+filepath.Join(dir, "examples", "support")+`"?`, cmd)
	}
	var stderr strings.Builder
	code := Main(context.Background(), []string{"vet", filepath.Join(dir, "examples", "payments")}, &strings.Builder{}, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "agentc: "+filepath.Join(dir, "examples", "payments")+": no such file or directory\n", stderr.String(), "no neighbour is close")
}

// rel shortens a path below the working directory, as vet's diagnostics
// are, and leaves one outside it as given rather than climbing with "..".
func TestRelKeepsPathsOutsideTheWorkingDirectory(t *testing.T) {
	env := &cliEnv{wd: "/work/repo"}
	assert.Equal(t, filepath.Join("examples", "support"), rel(env, "/work/repo/examples/support"))
	assert.Equal(t, "/tmp/policy", rel(env, "/tmp/policy"))
}
