package filecheck_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/filecheck"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A relative root is resolved against Deps.Dir, not the working directory.
func TestRelativeRootResolvesAgainstDepsDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "workspace"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "workspace", "a.txt"), []byte("x"), 0o644))

	p := runtimetest.Plan(plan.Chains{Tool: []plan.Layer{runtimetest.Layer("file_check", `{"roots":["workspace"],"must_exist":true}`)}})
	p.Tools = map[string]plan.Tool{"read": {PathArg: "path"}}
	var opened string
	read := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		opened, _ = c.Args["path"].(string)
		return "ok", nil
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"read": read}, Dir: dir})
	require.NoError(t, err)
	defer pl.Close()

	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "read", Args: map[string]any{"path": "a.txt"}})
	require.NoError(t, err)
	want, err := filepath.EvalSymlinks(filepath.Join(dir, "workspace", "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, want, opened)

	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "read", Args: map[string]any{"path": "../outside.txt"}})
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))

	// Without Dir the root is taken from the working directory, where it
	// does not exist: Build fails naming the layer.
	_, err = runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"read": read}})
	assert.ErrorContains(t, err, "file_check")
}
