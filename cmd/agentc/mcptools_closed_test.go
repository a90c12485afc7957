package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/serve"
)

// TestMCPToolsPrintsClosedDeclarations: mcp-tools printed each tool's
// input schema open, so once the upstream added an argument (read_doc's
// alt, fetch's mirror) a call carrying /etc/passwd or the metadata URL in
// it passed file_check and egress, which check path_arg and url_arg only,
// and reached the upstream. The declarations are printed closed
// (additionalProperties: false, or unevaluatedProperties: false for a
// schema composed with allOf or $ref), unless the upstream's schema says
// itself what else it takes; the output vets, compiles to those schemas,
// and serve refuses a call carrying an argument they do not list.
func TestMCPToolsPrintsClosedDeclarations(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	add := func(name, schema string) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(schema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				sent = append(sent, name+" "+string(req.Params.Arguments))
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	add("read_doc", `{"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}`)
	add("fetch", `{"type":"object","required":["url"],"properties":{"url":{"type":"string"}}}`)
	add("labels", `{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":{"type":"string"}}`)
	add("combo", `{"type":"object","allOf":[{"properties":{"q":{"type":"string"}}}]}`)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close) // after the gateway fronting it has closed (cleanups run last first)

	root := t.TempDir()
	dir := t.TempDir()
	policy := fmt.Sprintf(`package gw

mcp: servers: docs: url: %q
chains: tool: [
	{use: "egress", allow: ["example.com"], scan_args: false, tools: ["fetch"]},
	{use: "file_check", roots: [%q], tools: ["read_doc"]},
]
`, ts.URL, root)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))
	out := filepath.Join(dir, "mcp_tools.cue")
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, Main(context.Background(), []string{"mcp-tools", "-o", out, dir}, &stdout, &stderr), stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	printed := string(b)
	stderr.Reset()
	require.Equal(t, exitOK, Main(context.Background(), []string{"vet", dir}, &stdout, &stderr), "%s\n%s", printed, stderr.String())

	c, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan, "%v", c.Diagnostics)
	schema := func(tool string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(c.Plan.Tools[tool].Args, &m), tool)
		return m
	}
	assert.Equal(t, false, schema("read_doc")["additionalProperties"], printed)
	assert.Equal(t, false, schema("fetch")["additionalProperties"], printed)
	assert.Equal(t, map[string]any{"type": "string"}, schema("labels")["additionalProperties"], "the upstream's own word stays")
	assert.Equal(t, false, schema("combo")["unevaluatedProperties"], printed)
	assert.NotContains(t, schema("combo"), "additionalProperties", "it would refuse q, which allOf lists")

	// Served, a call carrying an argument the declaration does not list is
	// refused; the arguments it lists pass.
	cs := serveMCPClient(t, dir)
	call := func(name, args string) string {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return fmt.Sprint(res.IsError, " ", strings.Join(text, ""))
	}
	assert.Contains(t, call("read_doc", fmt.Sprintf(`{"path":%q,"alt":"/etc/passwd"}`, root+"/a.txt")), "true blocked by tools")
	assert.Contains(t, call("fetch", `{"url":"https://example.com/","mirror":"http://169.254.169.254/latest/meta-data/"}`), "true blocked by tools")
	mu.Lock()
	assert.Empty(t, sent, "no call with an argument the declaration does not list reached the upstream")
	mu.Unlock()
	assert.Equal(t, "false ok", call("combo", `{"q":"x"}`))
	assert.Equal(t, "false ok", call("labels", `{"id":"1","colour":"red"}`))
}

// TestMCPToolsClosesTheFilesystemServersDeclarations: the npm filesystem
// server's input schemas are open; printed closed, they vet, and a
// read_text_file carrying an argument they do not list is refused while
// one they list reads the file.
func TestMCPToolsClosesTheFilesystemServersDeclarations(t *testing.T) {
	bin := os.Getenv("AGENTC_MCP_FILESYSTEM")
	if bin == "" {
		t.Skip("set AGENTC_MCP_FILESYSTEM to the mcp-server-filesystem binary to run this test")
	}
	dir, root := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("inside"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(fmt.Sprintf(
		"package gw\n\nmcp: servers: fs: command: [%q, %q]\nchains: tool: [{use: \"file_check\", roots: [%q]}]\n", bin, root, root)), 0o644))
	out := filepath.Join(dir, "mcp_tools.cue")
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, Main(context.Background(), []string{"mcp-tools", "-o", out, dir}, &stdout, &stderr), stderr.String())
	stderr.Reset()
	require.Equal(t, exitOK, Main(context.Background(), []string{"vet", dir}, &stdout, &stderr), stderr.String())
	c, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan)
	require.NotEmpty(t, c.Plan.Tools)
	for name, tool := range c.Plan.Tools {
		var m map[string]any
		require.NoError(t, json.Unmarshal(tool.Args, &m), name)
		assert.Equal(t, false, m["additionalProperties"], name)
	}

	cs := serveMCPClient(t, dir)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "a.txt"), "alt": "/etc/passwd"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "blocked by tools")
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "a.txt")}})
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content[0].(*mcp.TextContent).Text)
	assert.Equal(t, "inside", res.Content[0].(*mcp.TextContent).Text)
}

// serveMCPClient serves the policy in dir and returns an MCP client
// session connected to its /mcp endpoint; both end with the test.
func serveMCPClient(t *testing.T, dir string) *mcp.ClientSession {
	t.Helper()
	s, err := serve.New(context.Background(), serve.Options{Source: policySource(dir, &cliEnv{stderr: io.Discard}, slog.New(slog.NewTextHandler(io.Discard, nil))),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WatchInterval: -1})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
