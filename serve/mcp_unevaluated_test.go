package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPDraft07UnevaluatedPropertiesCloses: an upstream tool whose
// draft-07 input schema closes its object with unevaluatedProperties:
// false, a keyword draft-07 does not have, was checked as an open object:
// a call carrying another argument passed to the upstream. Where the
// keyword stands beside properties alone it closes the object as
// additionalProperties would, and the call is refused before the chain;
// where an applicator (allOf...) stands beside it, which that cannot
// replace, the load warns naming the tool.
func TestMCPDraft07UnevaluatedPropertiesCloses(t *testing.T) {
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "store", Version: "1"}, nil)
	handle := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "put", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"name":{"type":"string"}},"unevaluatedProperties":false}`)}, handle)
	srv.AddTool(&mcp.Tool{Name: "put_all", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"allOf":[{"properties":{"name":{"type":"string"}}}],"unevaluatedProperties":false}`)}, handle)
	srv.AddTool(&mcp.Tool{Name: "put_declared", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"allOf":[{"properties":{"name":{"type":"string"}}}],"unevaluatedProperties":false}`)}, handle)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: store: url: %q
tools: put_declared: {side_effecting: true, args: {type: "object", properties: name: type: "string", additionalProperties: false}}
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"name": "a", "owner": "root"}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "the argument the schema closes out is refused: %s", text(t, res))
	assert.Contains(t, text(t, res), "owner")
	assert.Zero(t, calls.Load(), "the call was not sent")

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"name": "a"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	assert.EqualValues(t, 1, calls.Load())

	assert.Contains(t, s.logs.String(), "mcp tool's input schema closes an object with unevaluatedProperties, which its draft does not have")
	assert.Contains(t, s.logs.String(), "tool=put_all")
	assert.NotContains(t, s.logs.String(), "tool=put ")
	// A tool whose args the policy declares is checked against them, not
	// against its input schema: nothing is said of the schema's keyword.
	assert.NotContains(t, s.logs.String(), "tool=put_declared")
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put_declared", Arguments: map[string]any{"name": "a", "owner": "root"}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "the declaration closes it: %s", text(t, res))
}
