package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedServer serves an MCP server only to requests carrying an
// Authorization (others get a 401), and lists its tools only to those
// carrying Authorization: Bearer key; it refuses the list to others with
// an error that echoes the Authorization they sent, as some servers do.
func keyedServer(t *testing.T, key string) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look a city up."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, nil
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if got := req.GetExtra().Header.Get("Authorization"); method == "tools/list" && got != "Bearer "+key {
				return nil, fmt.Errorf("refused: %s is not a key of this server", got)
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestMCPToolsHeader: -header sends a credential to the -url server, as a
// policy's headers do (a ${NAME} read from the environment); a refused
// credential fails without its value in the error.
func TestMCPToolsHeader(t *testing.T) {
	url := keyedServer(t, "s3cret-key-1")
	run := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), append([]string{"mcp-tools", "-url", url}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, _, stderr := run()
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr, "Unauthorized")

	code, stdout, stderr := run("-header", "Authorization: Bearer s3cret-key-1", "-header", "X-Toolsets: repos")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "// Look a city up.\n\tlookup: {")

	t.Setenv("AGENTC_TEST_MCP_KEY", "s3cret-key-1")
	code, stdout, stderr = run("-header", "Authorization:Bearer ${AGENTC_TEST_MCP_KEY}")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "lookup: {")

	code, _, stderr = run("-header", "Authorization: Bearer wrong-key-22")
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr, "refused: [redacted] is not a key")
	assert.NotContains(t, stderr, "wrong-key-22", "a header's value is scrubbed from the error")
}

// A malformed -header is a usage error naming it, never showing its value;
// -header without -url is one too.
func TestMCPToolsHeaderMalformed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "X-Ok: 1", "-header", "Bearer s3cret-key-1"}, `-header 2 of 2 is not "Name: value"`},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", ": s3cret-key-1"}, `-header 1 of 1 is not "Name: value"`},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "Api Key: s3cret-key-1"}, `-header 1 of 1: its name "Api Key" is not a header name`},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "Authorization: Bearer s3cret-key-1$"}, "-header Authorization: its value holds a $ that is neither ${NAME}"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "Authorization: s3cret-key-1\r\nX: y"}, "-header Authorization: its value holds a line break"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "authorization: s3cret-key-1", "-header", "Authorization: s3cret-key-1"}, "-header Authorization is given twice (as authorization before)"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "mcp-session-id: s3cret-key-1"}, "-header mcp-session-id is set by the MCP transport itself"},
		{[]string{"-url", "http://127.0.0.1:1/mcp", "-header", "Content-Type: text/plain"}, "-header Content-Type is set by the MCP transport itself"},
		{[]string{"-header", "Authorization: s3cret-key-1", t.TempDir()}, "-header applies to -url"},
	} {
		var stdout, stderr strings.Builder
		assert.Equal(t, exitUsage, Main(context.Background(), append([]string{"mcp-tools"}, c.args...), &stdout, &stderr), c.args)
		assert.Contains(t, stderr.String(), c.want, c.args)
		assert.Contains(t, stderr.String(), "usage: agentc mcp-tools", c.args)
		assert.NotContains(t, stderr.String(), "s3cret-key-1", c.args)
		assert.Empty(t, stdout.String(), c.args)
	}
}
