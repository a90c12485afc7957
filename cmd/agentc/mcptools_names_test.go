package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// namedToolsServer serves an MCP server with a tool, without annotations,
// under each of names.
func namedToolsServer(t *testing.T, names ...string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	for _, name := range names {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// mcpToolsThenVet runs mcp-tools -o mcp_tools.cue on a policy, then vet on
// it with the output beside it, and returns the output and the stderr of
// mcp-tools.
func mcpToolsThenVet(t *testing.T, policy string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))
	out := filepath.Join(dir, "mcp_tools.cue")
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, Main(context.Background(), []string{"mcp-tools", "-o", out, dir}, &stdout, &stderr), stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var vetOut, vetErr strings.Builder
	assert.Equal(t, exitOK, Main(context.Background(), []string{"vet", dir}, &vetOut, &vetErr), "%s\n%s\n%s", b, vetOut.String(), vetErr.String())
	return string(b), stderr.String()
}

// TestMCPToolsLeavesOutNamesThePolicyCannotWrite: tools named 9x or -del
// were printed as entries vet then refused ("is not a name"). They are
// withheld, as serve withholds them: a comment in place of an entry, and
// named on stderr; behind a prefix that makes them names, printed.
func TestMCPToolsLeavesOutNamesThePolicyCannotWrite(t *testing.T) {
	url := namedToolsServer(t, "9x", "-del", ".hidden", "ok")
	out, stderr := mcpToolsThenVet(t, fmt.Sprintf("package gw\n\nmcp: servers: three: {url: %q}\n", url))
	for _, name := range []string{"9x", "-del", ".hidden"} {
		assert.Contains(t, out, fmt.Sprintf("// %q: WITHHELD", name))
		assert.NotContains(t, out, fmt.Sprintf("\n\t%q: {", name))
		assert.Contains(t, stderr, "tool="+name)
	}
	assert.Contains(t, out, "\tok: {")

	out, _ = mcpToolsThenVet(t, fmt.Sprintf("package gw\n\nmcp: servers: three: {url: %q, prefix: \"t_\"}\n", url))
	assert.Contains(t, out, "\tt_9x: {")
	assert.NotContains(t, out, "WITHHELD")
}
