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

// toolEntry returns the entry of tool name in the output of mcp-tools.
func toolEntry(t *testing.T, out, name string) string {
	t.Helper()
	i := strings.Index(out, "\t"+name+": {")
	if !assert.GreaterOrEqual(t, i, 0, "no entry %s in\n%s", name, out) {
		return ""
	}
	e := out[i:]
	return e[:strings.Index(e, "\n\t}")]
}

// TestMCPToolsWritesSideEffectingOverThePolicysDefault: for a tool the
// policy declares only for its args, side_effecting was left out because
// the loaded plan's false (the schema's default) differed from the
// server's true, and the tool stayed side_effecting: false. The default
// is not the policy's own value: the server's is written over it.
func TestMCPToolsWritesSideEffectingOverThePolicysDefault(t *testing.T) {
	url := namedToolsServer(t, "ping", "pong")
	out, _ := mcpToolsThenVet(t, fmt.Sprintf(`package gw

mcp: servers: one: {url: %q}
tools: ping: {args: {type: "object", properties: path: type: "string"}}
tools: pong: {side_effecting: false}
`, url))
	ping := toolEntry(t, out, "ping")
	assert.Contains(t, ping, "side_effecting: true")
	assert.NotContains(t, ping, "args:", "the policy declares its args")
	pong := toolEntry(t, out, "pong")
	assert.NotContains(t, pong, "side_effecting")
	assert.Contains(t, out, "// Left to the policy's declaration of this tool: side_effecting (the server's definition gives true).")
	assert.Equal(t, 1, strings.Count(out, "side_effecting (the server's"), "only pong's is left to the policy")
}

// TestMCPToolsWritesRetrySafeOverThePolicysDefault: retry_safe the server
// gives (idempotentHint) is written over the schema's default alike, and
// left to a value the policy writes.
func TestMCPToolsWritesRetrySafeOverThePolicysDefault(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	for _, name := range []string{"put", "set"} {
		srv.AddTool(&mcp.Tool{Name: name, Annotations: &mcp.ToolAnnotations{IdempotentHint: true}, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	out, _ := mcpToolsThenVet(t, fmt.Sprintf(`package gw

mcp: servers: one: {url: %q}
tools: put: {args: {type: "object"}}
tools: set: {retry_safe: false}
`, ts.URL))
	assert.Regexp(t, `retry_safe: +true`, toolEntry(t, out, "put"))
	assert.NotContains(t, toolEntry(t, out, "set"), "retry_safe")
	assert.Contains(t, out, "// Left to the policy's declaration of this tool: retry_safe (the server's definition gives true).")
}

// TestMCPToolsFromAPlanLeavesEveryDifferingValue: a plan.json keeps the
// values, not whether the policy wrote them: a value that differs from
// the server's is left to the plan.
func TestMCPToolsFromAPlanLeavesEveryDifferingValue(t *testing.T) {
	url := namedToolsServer(t, "ping")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(fmt.Sprintf("package gw\n\nmcp: servers: one: {url: %q}\ntools: ping: {args: {type: \"object\"}}\n", url)), 0o644))
	planFile := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, Main(context.Background(), []string{"build", "-o", planFile, dir}, &stdout, &stderr), stderr.String())
	stdout.Reset()
	require.Equal(t, exitOK, Main(context.Background(), []string{"mcp-tools", planFile}, &stdout, &stderr), stderr.String())
	assert.NotContains(t, toolEntry(t, stdout.String(), "ping"), "side_effecting")
	assert.Contains(t, stdout.String(), "// Left to the policy's declaration of this tool: side_effecting (the server's definition gives true).")
}
