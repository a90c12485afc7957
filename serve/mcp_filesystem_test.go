package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// fsBinary is the filesystem MCP server from npm, or skips the test.
func fsBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AGENTC_MCP_FILESYSTEM")
	if bin == "" {
		t.Skip("set AGENTC_MCP_FILESYSTEM to the mcp-server-filesystem binary (.ci/run installs it: npm ci --prefix .ci/node) to run this test")
	}
	return bin
}

// fsPolicy declares the filesystem server under the prefix fs_ with the
// entries `agentc mcp-tools` prints for its path tools, file_check on
// root, a guard, audit and idempotent on the writes.
const fsPolicy = `package gw

mcp: servers: fs: {command: [%q, %q], prefix: "fs_"}
tools: {
	fs_read_text_file: {side_effecting: false, path_arg: "path"}
	fs_read_multiple_files: {side_effecting: false, path_arg: "/paths/*"}
	fs_list_directory: {side_effecting: false, path_arg: "path"}
	fs_search_files: {side_effecting: false, path_arg: "path"}
	fs_write_file: {side_effecting: true, path_arg: "path"}
	fs_edit_file: {side_effecting: true, path_arg: "path"}
	fs_move_file: {side_effecting: true, path_arg: ["source", "destination"]}
}
chains: tool: [
	{use: "file_check", roots: [%q]},
	{use: "guard", name: "no_env", tools: ["fs_write_file"], deny: "args.path.endsWith('.env')", message: "no .env files"},
	{use: "audit", trail: "logical"},
	{use: "idempotent", tools: ["fs_write_file", "fs_edit_file", "fs_move_file"]},
]
`

// TestMCPFilesystemEndToEnd drives the real filesystem server through the
// proxy as an MCP client does: listing, reading, writing, editing,
// searching, and traversals the upstream must never see.
func TestMCPFilesystemEndToEnd(t *testing.T) {
	bin := fsBinary(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("alpha\nbeta\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret\n"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "secret-link.txt")))
	// The server is given the parent of both, so that only the gateway
	// keeps the calls inside root.
	parent := filepath.Dir(root)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fsPolicy, bin, parent, root)))})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()

	// The tools are listed under the prefix, with the upstream's schemas.
	direct := connectFilesystem(t, bin, parent)
	upstream, err := UpstreamTools(ctx, direct)
	require.NoError(t, err)
	listed, err := UpstreamTools(ctx, cs)
	require.NoError(t, err)
	require.Len(t, listed, len(upstream))
	byName := map[string]*mcp.Tool{}
	for _, tool := range listed {
		byName[tool.Name] = tool
	}
	for _, tool := range upstream {
		got := byName["fs_"+tool.Name]
		require.NotNil(t, got, tool.Name)
		want, _ := json.Marshal(tool.InputSchema)
		have, _ := json.Marshal(got.InputSchema)
		assert.JSONEq(t, string(want), string(have), tool.Name)
		assert.Equal(t, tool.Description, got.Description, tool.Name)
	}

	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err, name)
		return text(t, res), res.IsError
	}
	calls := func() int64 {
		var n int64
		for _, tool := range s.srv.cur.Load().mcp.tools {
			n += tool.calls.Load()
		}
		return n
	}

	out, isErr := call("fs_read_text_file", map[string]any{"path": filepath.Join(root, "notes.txt")})
	require.False(t, isErr, out)
	assert.Equal(t, "alpha\nbeta\n", out)
	out, isErr = call("fs_write_file", map[string]any{"path": filepath.Join(root, "new.txt"), "content": "gamma\n"})
	require.False(t, isErr, out)
	out, isErr = call("fs_edit_file", map[string]any{"path": filepath.Join(root, "new.txt"), "edits": []any{map[string]any{"oldText": "gamma", "newText": "delta"}}})
	require.False(t, isErr, out)
	b, err := os.ReadFile(filepath.Join(root, "new.txt"))
	require.NoError(t, err)
	assert.Equal(t, "delta\n", string(b))
	out, isErr = call("fs_list_directory", map[string]any{"path": root})
	require.False(t, isErr, out)
	assert.Contains(t, out, "[FILE] new.txt")
	out, isErr = call("fs_search_files", map[string]any{"path": root, "pattern": "*.txt"})
	require.False(t, isErr, out)
	assert.Contains(t, out, "notes.txt")
	out, isErr = call("fs_write_file", map[string]any{"path": filepath.Join(root, "prod.env"), "content": "x"})
	assert.True(t, isErr)
	assert.Contains(t, out, "blocked by no_env")
	_, err = os.Stat(filepath.Join(root, "prod.env"))
	assert.True(t, os.IsNotExist(err))

	sent := calls()
	for _, tt := range []struct {
		tool string
		args map[string]any
	}{
		{"fs_read_text_file", map[string]any{"path": filepath.Join(root, "..", filepath.Base(outside), "secret.txt")}},
		{"fs_read_text_file", map[string]any{"path": filepath.Join(outside, "secret.txt")}},
		{"fs_read_text_file", map[string]any{"path": filepath.Join(root, "escape", "secret.txt")}},
		{"fs_read_text_file", map[string]any{"path": filepath.Join(root, "secret-link.txt")}},
		{"fs_read_text_file", map[string]any{"path": root + "/%2e%2e/" + filepath.Base(outside) + "/secret.txt"}},
		{"fs_read_text_file", map[string]any{"path": root + "/..%2f" + filepath.Base(outside) + "%2fsecret.txt"}},
		{"fs_read_text_file", map[string]any{"path": "../" + filepath.Base(outside) + "/secret.txt"}},
		{"fs_read_multiple_files", map[string]any{"paths": []any{filepath.Join(root, "notes.txt"), filepath.Join(outside, "secret.txt")}}},
		{"fs_list_directory", map[string]any{"path": outside}},
		{"fs_search_files", map[string]any{"path": parent, "pattern": "secret*"}},
		{"fs_write_file", map[string]any{"path": filepath.Join(outside, "planted.txt"), "content": "x"}},
		{"fs_write_file", map[string]any{"path": filepath.Join(root, "escape", "planted.txt"), "content": "x"}},
		{"fs_move_file", map[string]any{"source": filepath.Join(outside, "secret.txt"), "destination": filepath.Join(root, "stolen.txt")}},
		{"fs_move_file", map[string]any{"source": filepath.Join(root, "notes.txt"), "destination": filepath.Join(outside, "notes.txt")}},
	} {
		out, isErr := call(tt.tool, tt.args)
		assert.True(t, isErr, "%s %v: %s", tt.tool, tt.args, out)
		assert.Contains(t, out, "blocked by file_check", "%s %v", tt.tool, tt.args)
		assert.NotContains(t, out, "top secret")
	}
	assert.Equal(t, sent, calls(), "no traversal reached the upstream")
	_, err = os.Stat(filepath.Join(outside, "planted.txt"))
	assert.True(t, os.IsNotExist(err))
	b, err = os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, "top secret\n", string(b))

	// A path with a look-alike of the slash (U+2215) names a file inside
	// root, which the server does not find: it is not a way out.
	out, isErr = call("fs_read_text_file", map[string]any{"path": root + "/..\u2215" + filepath.Base(outside) + "\u2215secret.txt"})
	assert.True(t, isErr, out)
	assert.NotContains(t, out, "top secret")
}

// connectFilesystem connects straight to the filesystem server.
func connectFilesystem(t *testing.T, bin string, dirs ...string) *mcp.ClientSession {
	t.Helper()
	cs, err := Upstream(context.Background(), "fs", plan.MCPServer{Command: append([]string{bin}, dirs...)}, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPFilesystemConcurrentSessions: two sessions calling the same
// upstream at once each get their own answers.
func TestMCPFilesystemConcurrentSessions(t *testing.T) {
	bin := fsBinary(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for i := range 8 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat(fmt.Sprint(i), 1000)), 0o644))
	}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fsPolicy, bin, root, root)))})
	sessions := []*mcp.ClientSession{connectProxy(t, s.url, "", nil), connectProxy(t, s.url, "", nil)}
	var wg sync.WaitGroup
	for k, cs := range sessions {
		for i := range 8 {
			wg.Go(func() {
				for range 5 {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_read_text_file",
						Arguments: map[string]any{"path": filepath.Join(root, fmt.Sprintf("f%d.txt", i))}})
					if !assert.NoError(t, err, k) {
						return
					}
					assert.False(t, res.IsError)
					assert.Equal(t, strings.Repeat(fmt.Sprint(i), 1000), text(t, res), "session %d file %d", k, i)
				}
			})
		}
	}
	wg.Wait()
}

// childPIDs returns the processes this test process started whose command
// line holds arg.
func childPIDs(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to find the upstream's process in")
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && bytes.Contains(cmdline, []byte(arg)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestMCPFilesystemResultsAndFailures: a large file within the result
// limit (1.5 MiB, sent twice) is served whole, one past it (3 MiB, sent
// twice) is an error naming the limit, an
// upstream error is the client's error result, and an upstream that dies
// mid-session fails no later call: it is started again.
func TestMCPFilesystemResultsAndFailures(t *testing.T) {
	bin := fsBinary(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	// The server sends a file's text twice, as text and as structured
	// content, and both count against the limit of 4 MiB.
	big := strings.Repeat("0123456789abcdef\n", 3<<19/17)
	require.NoError(t, os.WriteFile(filepath.Join(root, "big.txt"), []byte(big), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "huge.txt"), []byte(strings.Repeat("x", 3<<20)), 0o644))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fsPolicy, bin, root, root)))})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	read := func(name string) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_read_text_file", Arguments: map[string]any{"path": filepath.Join(root, name)}})
		require.NoError(t, err, name)
		return text(t, res), res.IsError
	}

	out, isErr := read("big.txt")
	require.False(t, isErr, out[:min(len(out), 200)])
	assert.Equal(t, big, out)
	out, isErr = read("huge.txt")
	assert.True(t, isErr)
	assert.Contains(t, out, "the tool ran, but its result is over the limit of 4194304 bytes")
	out, isErr = read("missing.txt")
	assert.True(t, isErr)
	assert.Contains(t, out, "ENOENT")

	pids := childPIDs(t, root)
	require.Len(t, pids, 2, "one filesystem server lists the tools, one serves the calls (of the one tenant)")
	for _, pid := range pids {
		p, err := os.FindProcess(pid)
		require.NoError(t, err)
		require.NoError(t, p.Kill())
	}
	require.Eventually(t, func() bool {
		out, isErr := read("big.txt")
		return !isErr && out == big
	}, 30*time.Second, 100*time.Millisecond, "the server is started again for a later call")
	out, isErr = read("missing.txt")
	assert.True(t, isErr)
	assert.Contains(t, out, "ENOENT")
}
