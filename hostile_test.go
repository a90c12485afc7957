package agentc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc"
	agentcruntime "github.com/agentc-dev/agentc/runtime"
)

// TestLoadLeavesNothingBehind loads policies whose files or JSON Schema
// paths are special files (a symbolic link to /dev/zero, a FIFO, a path out
// of the policy directory). Load must return a policy error promptly, with
// no goroutine left running and no memory still growing after it returns.
func TestLoadLeavesNothingBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux (FIFOs, /dev/zero)")
	}
	cases := map[string]func(t *testing.T, dir string){
		"schema symlink to /dev/zero": func(t *testing.T, dir string) {
			writePolicy(t, dir, `tools: t: args: "z.json"`)
			require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "z.json")))
		},
		"schema at /dev/zero": func(t *testing.T, dir string) { writePolicy(t, dir, `tools: t: args: "/dev/zero"`) },
		"schema FIFO": func(t *testing.T, dir string) {
			writePolicy(t, dir, `tools: t: args: "f.json"`)
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "f.json"), 0o644))
		},
		"policy FIFO": func(t *testing.T, dir string) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "p.cue"), 0o644))
		},
		"policy symlink to /dev/zero": func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, "p.cue")))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			setup(t, dir)
			before := runtime.NumGoroutine()
			var m0 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)

			start := time.Now()
			_, err := agentc.Load(context.Background(), dir, agentcruntime.Deps{})
			assert.Less(t, time.Since(start), 2*time.Second)
			var pe *agentc.PolicyError
			require.True(t, errors.As(err, &pe), "a policy error, got %v", err)

			// Nothing outlives Load: the goroutine count is back where it
			// was, and the heap does not grow afterwards.
			deadline := time.Now().Add(time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left running after Load")
			time.Sleep(100 * time.Millisecond)
			var m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m1)
			assert.Less(t, int64(m1.HeapAlloc)-int64(m0.HeapAlloc), int64(64<<20), "heap growth after Load")
		})
	}
}

func writePolicy(t *testing.T, dir, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\n\n"+body+"\n"), 0o644))
}
