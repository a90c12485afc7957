package filecheck_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/filecheck"
	_ "github.com/agentc-dev/agentc/builtins/guard"
	_ "github.com/agentc-dev/agentc/builtins/toolpolicy"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestMiddleware(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("# a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.md"), make([]byte, 200), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.md"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(root, "link.md")))
	realRoot, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)

	cfg, err := json.Marshal(map[string]any{"roots": []string{root}, "extensions": []string{".md"}, "max_bytes": 100, "must_exist": true})
	require.NoError(t, err)
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("files", rt.Layer("file_check", string(cfg)))}})
	p.Tools = map[string]plan.Tool{"read_file": {PathArg: "path"}, "search_kb": {}}
	var seen map[string]any
	fn := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args
		return "ok", nil
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"read_file": fn, "search_kb": fn}})
	require.NoError(t, err)

	tests := []struct {
		name     string
		tool     string
		path     any
		wantPath string
		blocked  string
	}{
		{"relative inside", "read_file", "docs/a.md", filepath.Join(realRoot, "docs", "a.md"), ""},
		{"dot-dot inside the root", "read_file", "docs/../docs/a.md", filepath.Join(realRoot, "docs", "a.md"), ""},
		{"traversal", "read_file", "../../../etc/passwd", "", "escapes"},
		{"absolute outside", "read_file", filepath.Join(outside, "secret.md"), "", "denied"},
		{"symlink out", "read_file", "link.md", "", "denied"},
		{"extension", "read_file", "docs/a.txt", "", "denied"},
		{"missing", "read_file", "docs/none.md", "", "denied"},
		{"too big", "read_file", "big.md", "", "denied"},
		{"not a string", "read_file", 3.0, "", "not a string"},
		{"tool without path_arg", "search_kb", "../../etc/passwd", "../../etc/passwd", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = nil
			args := map[string]any{"path": tt.path}
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tt.tool, Args: args})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantPath, seen["path"], "the tool sees the resolved path")
				assert.Equal(t, tt.path, args["path"], "the caller's args are untouched")
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "files", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Nil(t, seen, "a refused path never reaches the tool")
		})
	}
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "read_file", Args: map[string]any{}})
	require.ErrorAs(t, err, new(*runtime.BlockedError))

	seen = nil
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "read_file", Args: map[string]any{"path": "docs/a.md", "Path": "/etc/passwd"}})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "a path in another case beside the checked one is refused")
	assert.Contains(t, b.Message, `/Path differs from /path only in case`)
	assert.Nil(t, seen)
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"roots":["/does/not/exist/anywhere"]}`, `{"roots":["/"],"extra":1}`} {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("file_check", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

// TestMiddlewareNestedAndSeveralPaths: every path a path_arg pointer or list
// reaches is checked and handed to the tool resolved; one escaping path
// refuses the call, and the caller's nested arguments are never modified.
func TestMiddlewareNestedAndSeveralPaths(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.md"), []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "b.md"), []byte("b"), 0o644))
	realRoot, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{"roots": []string{root}})
	require.NoError(t, err)
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("files", rt.Layer("file_check", string(cfg)))}})
	p.Tools = map[string]plan.Tool{
		"batch": {PathArg: "/files/*/path"},
		"copy":  {PathArg: "src", PathArgs: []string{"src", "dst"}},
	}
	var seen map[string]any
	fn := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args
		return "ok", nil
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"batch": fn, "copy": fn}})
	require.NoError(t, err)

	first := map[string]any{"path": "a.md"}
	args := map[string]any{"files": []any{first, map[string]any{"path": "b.md"}}}
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "batch", Args: args})
	require.NoError(t, err)
	files := seen["files"].([]any)
	assert.Equal(t, filepath.Join(realRoot, "a.md"), files[0].(map[string]any)["path"])
	assert.Equal(t, filepath.Join(realRoot, "b.md"), files[1].(map[string]any)["path"])
	assert.Equal(t, "a.md", first["path"], "the caller's nested arguments are untouched")

	for name, args := range map[string]map[string]any{
		"second escapes": {"files": []any{map[string]any{"path": "a.md"}, map[string]any{"path": "../../../etc/passwd"}}},
		"path a number":  {"files": []any{map[string]any{"path": 1.0}}},
		"files object":   {"files": map[string]any{"path": "/etc/passwd"}},
		"dst escapes":    nil,
	} {
		tool := "batch"
		if args == nil {
			tool, args = "copy", map[string]any{"src": "a.md", "dst": "/etc/cron.d/x"}
		}
		seen = nil
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tool, Args: args})
		require.ErrorAs(t, err, new(*runtime.BlockedError), name)
		assert.Nil(t, seen, name)
	}
}

// A root beginning with "~" is refused by Validate, which agentc vet runs:
// nothing expands it, and Build would look for a directory named "~".
func TestValidateRefusesTildeRoot(t *testing.T) {
	known, err := runtime.ValidateConfig("file_check", []byte(`{"roots":["/srv","~/work"]}`))
	assert.True(t, known)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `roots[1]: "~/work": a leading ~ is not expanded`)
	_, err = runtime.ValidateConfig("file_check", []byte(`{"roots":["/srv","./work~"]}`))
	assert.NoError(t, err)
}

// TestAdmitToolRefusesPathsTheClientReadsElsewhere: a proposed call (a
// gateway relays it to the client, which runs it) was admitted on the path
// as the layer resolves it, relative to its first root, while the client
// runs the tool on the text the model wrote: "etc/shadow" against its own
// working directory, "file:///etc/shadow" as a URL. A proposal's paths must
// be absolute; an absolute path inside a root is admitted as before.
func TestAdmitToolRefusesPathsTheClientReadsElsewhere(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "reports"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "reports", "q3.csv"), []byte("a,b"), 0o644))
	cfg, err := json.Marshal(map[string]any{"roots": []string{root}})
	require.NoError(t, err)
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("files", rt.Layer("file_check", string(cfg)))}})
	p.Tools = map[string]plan.Tool{"read_report": {PathArg: "path"}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err)
	defer pl.Close()

	admit := func(path string) error {
		return pl.AdmitTool(context.Background(), runtime.ToolRequest{Name: "read_report", Args: map[string]any{"path": path}})
	}
	for _, path := range []string{"etc/shadow", "reports/q3.csv", "file:///etc/shadow", "./reports/q3.csv", ""} {
		err := admit(path)
		var blocked *runtime.BlockedError
		require.ErrorAs(t, err, &blocked, "%q", path)
		assert.Equal(t, "files", blocked.Layer)
		if path != "" {
			assert.Contains(t, blocked.Message, "not absolute", "%q", path)
		}
	}
	require.NoError(t, admit(filepath.Join(root, "reports", "q3.csv")))
	require.NoError(t, admit(filepath.Join(root, "reports", "..", "reports", "new.csv")))
	var blocked *runtime.BlockedError
	require.ErrorAs(t, admit(filepath.Join(root, "..", "..", "etc", "shadow")), &blocked)

	// Run here, the call's relative path is read against the first root, and
	// the tool sees the resolved path: unchanged.
	realRoot, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	var seen any
	pl2, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"read_report": func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args["path"]
		return "ok", nil
	}}})
	require.NoError(t, err)
	defer pl2.Close()
	_, err = pl2.Tool(context.Background(), runtime.ToolRequest{Name: "read_report", Args: map[string]any{"path": "reports/q3.csv"}})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(realRoot, "reports", "q3.csv"), seen)
}

// TestScopedToAToolWithoutPathArgFailsClosed: a file_check layer whose
// tools: names a tool that declares no path_arg (one an MCP server serves
// that the policy does not declare, an undeclared tool) was meant to check
// that tool's paths and cannot tell which argument is one: the call is
// refused, run here or proposed, naming the tool and what to declare. A
// tool the layer is not scoped to, without path_arg, passes as before.
func TestScopedToAToolWithoutPathArgFailsClosed(t *testing.T) {
	root := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"roots": []string{root}})
	require.NoError(t, err)
	layer := rt.Named("files", rt.Layer("file_check", string(cfg)))
	layer.Tools = []string{"write_note", "undeclared", "read_file"}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{layer}})
	p.Tools = map[string]plan.Tool{"write_note": {}, "read_file": {PathArg: "path"}, "search_kb": {}}
	ran := 0
	fn := func(context.Context, *runtime.ToolCall) (any, error) { ran++; return "ok", nil }
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"write_note": fn, "undeclared": fn, "read_file": fn, "search_kb": fn}})
	require.NoError(t, err)
	defer pl.Close()

	for _, tool := range []string{"write_note", "undeclared"} {
		req := runtime.ToolRequest{Name: tool, Args: map[string]any{"path": "/etc/shadow"}}
		for name, err := range map[string]error{"run": func() error { _, err := pl.Tool(context.Background(), req); return err }(),
			"proposed": pl.AdmitTool(context.Background(), req)} {
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b, "%s %s", name, tool)
			assert.Equal(t, "files", b.Layer)
			assert.Contains(t, b.Message, "tool "+tool+" declares no path_arg")
			assert.Contains(t, b.Message, "declare its path_arg")
		}
	}
	assert.Zero(t, ran, "a call the layer cannot check never reaches the tool")
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"path": "/etc/shadow"}})
	require.NoError(t, err, "a tool outside the layer's tools: passes")
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "read_file", Args: map[string]any{"path": "/etc/shadow"}})
	require.ErrorAs(t, err, new(*runtime.BlockedError))
}

// TestAdmitToolInnerLayersReadTheResolvedPath: vet has a check of a path
// moved inside file_check, where it reads the real path. A proposed call
// (a gateway relays it to the client, which runs it) gave every layer the
// path as the model spelled it, so tool_policy `\.env$` inside file_check
// admitted "<root>/x/../.env/.", which the client opens as .env. The
// layers inside file_check now decide a proposal on the resolved path, as
// they do a call run here; the layers outside it see the spelling, and the
// caller's arguments, which the gateway relays, are untouched.
func TestAdmitToolInnerLayersReadTheResolvedPath(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, ".env"), []byte("SECRET=1"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(root, ".env"), filepath.Join(root, "link.txt")))
	fc, err := json.Marshal(map[string]any{"roots": []string{root}})
	require.NoError(t, err)
	tp, err := json.Marshal(map[string]any{"arg_patterns": []any{map[string]any{"arg": "path", "pattern": `\.env$`}}})
	require.NoError(t, err)
	outer := rt.Named("spelled", rt.Layer("guard", `{"deny":"args.path.contains('/./')"}`))
	scoped := rt.Named("scoped", rt.Layer("guard", `{"deny":"true"}`))
	scoped.When = &plan.Predicate{Stage: plan.StageTool, Source: "args.path.endsWith('/notes.txt')"}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{outer, rt.Named("files", rt.Layer("file_check", string(fc))),
		rt.Named("patterns", rt.Layer("tool_policy", string(tp))), scoped}})
	p.Tools = map[string]plan.Tool{"read_file": {PathArg: "path"}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err)
	defer pl.Close()

	admit := func(path string) (map[string]any, error) {
		args := map[string]any{"path": path}
		return args, pl.AdmitTool(context.Background(), runtime.ToolRequest{Name: "read_file", Args: args})
	}
	for _, path := range []string{
		filepath.Join(root, ".env"),
		filepath.Join(root, "x", "..", ".env") + "/.",
		root + "//.env",
		filepath.Join(root, "link.txt"),
	} {
		args, err := admit(path)
		var blocked *runtime.BlockedError
		require.ErrorAs(t, err, &blocked, "%q", path)
		assert.Equal(t, "patterns", blocked.Layer, "%q", path)
		assert.Equal(t, map[string]any{"path": path}, args, "the proposal is relayed as the model made it")
	}
	// A when inside file_check decides on the real path as well.
	_, err = admit(filepath.Join(root, "x", "..", "notes.txt"))
	var blocked *runtime.BlockedError
	require.ErrorAs(t, err, &blocked)
	assert.Equal(t, "scoped", blocked.Layer)
	// The layer outside file_check sees the spelling.
	_, err = admit(root + "/./notes.txt")
	require.ErrorAs(t, err, &blocked)
	assert.Equal(t, "spelled", blocked.Layer)
	_, err = admit(filepath.Join(root, "other.txt"))
	require.NoError(t, err)
}
