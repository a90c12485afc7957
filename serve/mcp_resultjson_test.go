package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPAfterGuardReadsJSONText: an upstream tool without an outputSchema
// answers JSON as text; with a result_schema declared for it, a guard of
// phase "after" reads result.status off the value the text encodes (as
// output_coerce checks it), so it passes an "ok" order and blocks a
// "failed" one, and the client gets the upstream's text as it was sent.
func TestMCPAfterGuardReadsJSONText(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "order", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			status := "ok"
			if strings.Contains(string(req.Params.Arguments), "bad") {
				status = "failed"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"id": "A1", "status": "` + status + `"}`}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: shop: url: %q
tools: order: result_schema: {type: "object", required: ["status"], properties: {id: type: "string", status: type: "string"}}
chains: tool: [{use: "guard", phase: "after", deny: "result.status == 'failed'", message: "the order failed"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, `{"id": "A1", "status": "ok"}`, text(t, res), "the upstream's text, unchanged")
	assert.Nil(t, res.StructuredContent)

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "bad"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "the order failed")
	assert.NotContains(t, text(t, res), "no such key", "blocked by the predicate, not by a failed read")
}

// TestMCPAfterGuardReadsStructuredContent: for a tool that declares an
// outputSchema, result is its structured content, the value its
// result_schema describes, not the MCP result object around it.
func TestMCPAfterGuardReadsStructuredContent(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	type orderIn struct {
		ID string `json:"id"`
	}
	type orderOut struct {
		Status string `json:"status"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "order", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, orderOut, error) {
			if in.ID == "bad" {
				return nil, orderOut{Status: "failed"}, nil
			}
			return nil, orderOut{Status: "ok"}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: shop: url: %q
tools: order: result_schema: {type: "object", required: ["status"], properties: status: type: "string"}
chains: tool: [{use: "guard", phase: "after", deny: "result.status == 'failed'", message: "the order failed"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, map[string]any{"status": "ok"}, res.StructuredContent)

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "bad"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "the order failed")
	assert.NotContains(t, text(t, res), "no such key")
	assert.Nil(t, res.StructuredContent)
}
