package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ids of the gateway's upstream accounts in their real shapes, and
// ordinary words that look like their prefixes.
const (
	orgID     = "org-Y7BYGmWRXNPOjZ7MbShyK4Cg"
	projectID = "proj_Q8rTn2VxW5yZ0aB3cD6eF9gH"
	orgWords  = "only org-members may run it, an org-wide setting kept in proj_settings"
)

// frontMCP serves srv on a loopback port and the gateway in front of it,
// as the MCP server name, for the key agent-key.
func frontMCP(t *testing.T, name string, srv *mcp.Server) *served {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: %s: url: %q
`, sha("agent-key"), name, ts.URL))), WatchInterval: -1})
}

// TestMCPToolErrorsWithoutAccountIDs: the error of an upstream tool reaches
// an MCP client without the account ids it names, as an upstream's error
// reaches a chat client; ordinary words that open as an id does (org-members,
// org-wide) are kept, on the MCP route and on the chat routes.
func TestMCPToolErrorsWithoutAccountIDs(t *testing.T) {
	failure := fmt.Sprintf("the export failed: rate limited in organization %s, project %s; %s", orgID, projectID, orgWords)
	srv := mcp.NewServer(&mcp.Implementation{Name: "export", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "export", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: failure}}}, nil
		})
	s := frontMCP(t, "export", srv)
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "export"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	got := text(t, res)
	assert.NotContains(t, got, orgID)
	assert.NotContains(t, got, projectID)
	assert.Contains(t, got, "rate limited in organization [redacted], project [redacted]; "+orgWords)

	// The chat routes keep the words too.
	refused := fmt.Sprintf(`{"error":{"message":"Invalid value: %s (%s)","type":"invalid_request_error","param":null,"code":"invalid_value"}}`, orgWords, orgID)
	g := newGateway(t, "", []reply{{status: 400, body: refused}, {status: 400, body: refused}, {status: 400, body: refused}}, nil)
	_, _, chat := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	_, _, messages := do(t, "POST", g.url+"/v1/messages", clientKey, messagesBody("primary", "hi", false), "anthropic-version", "2023-06-01")
	_, _, rs := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": "hi"}`))
	for _, body := range []string{chat, messages, rs} {
		assert.Contains(t, body, orgWords+" ([redacted])")
		assert.NotContains(t, body, orgID)
	}
}
