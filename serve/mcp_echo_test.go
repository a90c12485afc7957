package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPResultEchoingTheCredentialIsScrubbed: an upstream whose answer
// holds the credential the gateway sent it (a debugging tool that echoes
// the request's headers, a fetch tool that reports the request it made)
// does not hand it to the MCP client in a result either: its text
// contents and the strings of its structured content are scrubbed, as an
// error result's text is.
func TestMCPResultEchoingTheCredentialIsScrubbed(t *testing.T) {
	const token = "mcp-tok-5be0a1c9f4"
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "The caller.", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			auth := req.Extra.Header.Get("Authorization")
			if req.Params.Arguments != nil && string(req.Params.Arguments) == `{"text":true}` {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you called with " + auth}}}, nil
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "called with " + auth}, &mcp.ResourceLink{URI: "https://x.example/?t=" + token, Name: "me"}},
				StructuredContent: map[string]any{"headers": map[string]any{"authorization": []any{auth}}},
			}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	dir := writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: dbg: {url: %q, headers: Authorization: "Bearer ${DBG_MCP_TOKEN}"}
`, ts.URL))
	lookup := func(k string) (string, bool) { return token, k == "DBG_MCP_TOKEN" }
	s := startServer(t, Options{Source: cueSource(dir), LookupEnv: lookup, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{"text": true}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	assert.Equal(t, "you called with Bearer [redacted]", text(t, res))

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	b, err := res.MarshalJSON()
	require.NoError(t, err)
	assert.NotContains(t, string(b), token)
	assert.Contains(t, string(b), "called with Bearer [redacted]")
	assert.Equal(t, map[string]any{"headers": map[string]any{"authorization": []any{"Bearer [redacted]"}}}, res.StructuredContent)
	assert.NotContains(t, s.logs.String(), token)
}
