package main

import (
	"context"
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

// TestMCPToolsPrintsVettableCUE lists the tools of an MCP server a policy
// declares; pasted into the policy, the entries vet clean and type a guard.
func TestMCPToolsPrintsVettableCUE(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	type refundIn struct {
		OrderID string  `json:"order_id" jsonschema:"the order to refund"`
		Amount  float64 `json:"amount"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "refund", Description: "Refund an order.\nThe money goes back to the card."},
		func(context.Context, *mcp.CallToolRequest, refundIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	type readIn struct {
		Path string `json:"path"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, readIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	type syncIn struct {
		Path  string   `json:"path"`
		Files []string `json:"files"`
		URL   string   `json:"url"`
		Count int      `json:"link"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sync"},
		func(context.Context, *mcp.CallToolRequest, syncIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()

	dir := t.TempDir()
	policy := fmt.Sprintf("package p\n\nmcp: servers: pay: url: %q\n", ts.URL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))

	var stdout, stderr strings.Builder
	code := Main(context.Background(), []string{"mcp-tools", dir, "pay"}, &stdout, &stderr)
	require.Equal(t, exitOK, code, stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "// Refund an order.\n\t// The money goes back to the card.\n\trefund: {")
	assert.Contains(t, out, `path_arg:       "path"`)
	assert.Regexp(t, `path_arg: +\["path", "/files/\*"\]`, out, "every path argument of sync is declared, the list's elements too")
	assert.Regexp(t, `url_arg: +"url"`, out, "link holds a number, not a url")
	assert.Contains(t, out, "side_effecting: false", "read_file is marked read-only")
	assert.Contains(t, out, "side_effecting: true")

	// The entries are a valid part of the policy: a guard typed by them
	// vets clean, and a misspelt argument is a cel/type error.
	guard := "\nchains: tool: [{use: \"guard\", tools: [\"refund\"], deny: \"args.%s > 100.0\"}]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tools.cue"), []byte("package p\n\n"+out+fmt.Sprintf(guard, "amount")), 0o644))
	stdout.Reset()
	stderr.Reset()
	assert.Equal(t, exitOK, Main(context.Background(), []string{"vet", dir}, &stdout, &stderr), stderr.String())
	stderr.Reset()
	assert.Equal(t, exitUsage, Main(context.Background(), []string{"mcp-tools", dir, "nope"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `declares no mcp server "nope"`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tools.cue"), []byte("package p\n\n"+out+fmt.Sprintf(guard, "ammount")), 0o644))
	stderr.Reset()
	assert.Equal(t, exitProblems, Main(context.Background(), []string{"vet", dir}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "cel/type")
}
