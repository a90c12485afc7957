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

// TestMCPNumbersAreCheckedAndSentAsWritten: tools/call arguments were
// decoded to float64, so the guard denying account 9007199254740993 saw
// 9007199254740992 and let the call through, and the upstream was sent
// the rounded number (9007199254740995 reached it as 9007199254740996): an
// action on an account the client never named. The guard now decides on
// the number written, the upstream receives it, and a number that neither
// float64 nor int64 holds is refused by layer tools, never sent.
func TestMCPNumbersAreCheckedAndSentAsWritten(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "close_account", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			sent = append(sent, string(req.Params.Arguments))
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: bank: url: %q
tools: close_account: args: {type: "object", required: ["account_id"], properties: account_id: type: "integer"}
chains: tool: [{use: "guard", name: "protected", tools: ["close_account"], deny: "args.account_id == 9007199254740993", message: "account 9007199254740993 is protected"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "close_account", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		return res
	}

	res := call(`{"account_id": 9007199254740993}`)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by protected")
	for _, tc := range []struct{ args, field string }{
		{`{"account_id": 1, "rate": 0.1000000000000000055511151231257827}`, "args.rate"},
		{`{"account_id": 1, "rate": 1e400}`, "args.rate"},
		{`{"account_id": 123456789012345678901234567890}`, "args.account_id"},
	} {
		res := call(tc.args)
		require.True(t, res.IsError, tc.args)
		assert.Contains(t, text(t, res), "blocked by tools", tc.args)
		assert.Contains(t, text(t, res), tc.field, tc.args)
	}
	mu.Lock()
	assert.Empty(t, sent, "no refused call reached the upstream")
	mu.Unlock()

	res = call(`{"account_id": 9007199254740995, "rate": 0.1}`)
	require.False(t, res.IsError, text(t, res))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, 1)
	assert.JSONEq(t, `{"account_id": 9007199254740995, "rate": 0.1}`, sent[0])
	assert.Contains(t, sent[0], "9007199254740995", "the upstream receives the number written")
}
