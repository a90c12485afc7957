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

// TestMCPUndeclaredUpstreamArgumentsAreReported: a policy declaring an
// upstream tool's arguments (agentc mcp-tools's output, reviewed) has the
// tool chain check calls against its declaration, while the clients are
// listed the server's schema. A server that lists an argument the
// declaration does not (callback_url, added since) has it pass the chain
// unchecked by file_check, egress or a typed guard: the load says so,
// naming the tool and the arguments, unless the declaration is closed
// (additionalProperties: false), which refuses a call carrying one.
func TestMCPUndeclaredUpstreamArgumentsAreReported(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"order_id": map[string]any{"type": "string"}, "amount": map[string]any{"type": "number"},
		"callback_url": map[string]any{"type": "string"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	policy := `package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
tools: refund: {side_effecting: true, args: {type: "object", %sproperties: {order_id: {type: "string"}, amount: {type: "number"}}}}
`
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(policy, sha("agent-key"), ts.URL, ""))), WatchInterval: -1})
	assert.Contains(t, s.logs.String(), `msg="mcp tool's input schema lists arguments its declaration in the policy does not" tool=refund server=pay arguments=[callback_url]`)
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 5}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "the tool is served")

	s = startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(policy, sha("agent-key"), ts.URL, "additionalProperties: false, "))), WatchInterval: -1})
	assert.NotContains(t, s.logs.String(), "declaration in the policy does not")
}
