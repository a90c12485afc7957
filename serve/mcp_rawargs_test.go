package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPArgumentsReachTheUpstreamAsWritten: the arguments of a tools/call
// were sent to the upstream encoded again from their decoded values, so
// 500.0 reached it as 500, 1e2 as 100 and 1.50 as 1.5 (an upstream that
// tells an integer from a float, or checks a signature over the body, saw
// another text than the client sent). They are sent as the client wrote
// them when the chain passes them unchanged; arguments a layer rewrites
// (file_check's resolved path) are sent as rewritten, and an integer
// beyond 2^53 keeps every digit either way.
func TestMCPArgumentsReachTheUpstreamAsWritten(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	record := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		sent = append(sent, string(req.Params.Arguments))
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "pay", InputSchema: json.RawMessage(`{"type":"object"}`)}, record)
	srv.AddTool(&mcp.Tool{Name: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}, record)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	root := t.TempDir()
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: bank: url: %q
tools: read: {side_effecting: false, path_arg: "path", args: {type: "object", properties: path: type: "string"}}
chains: tool: [{use: "file_check", roots: [%q], tools: ["read"]}]
`, ts.URL, root))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, sent)
		return sent[len(sent)-1]
	}

	for _, args := range []string{
		`{"amount":500.0}`, `{"amount":1e2}`, `{"amount":1.50}`, `{"amount":-0.0}`,
		`{"account_id":9007199254740993,"amount":12.30,"memo":"x"}`,
		`{"nested":{"n":[1.0,2E+1,3.000]}}`,
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
		assert.Equal(t, args, last(), "the upstream receives the arguments as the client wrote them")
	}

	// Text the chain reads as U+FFFD is sent as the chain read it.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay", Arguments: json.RawMessage(`{"memo":"\ud800x","amount":1.0}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.NotContains(t, last(), `\ud800`)

	// file_check hands the upstream the path resolved within its root.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: json.RawMessage(fmt.Sprintf(`{"path":%q,"n":9007199254740995,"x":1.0}`, root+"/sub/../a.txt"))})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	got := last()
	assert.NotContains(t, got, "/sub/../", "the path file_check resolved is sent")
	assert.Contains(t, got, "9007199254740995", "an integer beyond 2^53 keeps its digits")
}
