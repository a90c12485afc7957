package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPHangingListingHoldsNoOtherServer: an upstream whose tools/list
// hangs after it announced a change (for 30 s, the bound of a listing)
// held the lock that builds generations while it was listed, so another
// upstream's change, and a reload, waited for it. Its listing no longer
// holds the lock: the other upstream's new tool is served at once.
func TestMCPHangingListingHoldsNoOtherServer(t *testing.T) {
	h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	serve := func(srv *mcp.Server) string {
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	slow := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	slow.AddTool(&mcp.Tool{Name: "a", InputSchema: map[string]any{"type": "object"}}, h)
	lists := holdLists(slow)
	quick := mcp.NewServer(&mcp.Implementation{Name: "quick", Version: "1"}, nil)
	quick.AddTool(&mcp.Tool{Name: "b", InputSchema: map[string]any{"type": "object"}}, h)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: {slow: url: %q, quick: url: %q}
`, sha("agent-key"), serve(slow), serve(quick)))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	t.Cleanup(lists.free) // before the servers close (cleanups run last first)

	lists.hold()
	slow.AddTool(&mcp.Tool{Name: "a2", InputSchema: map[string]any{"type": "object"}}, h)
	lists.waitHeld(t)
	quick.AddTool(&mcp.Tool{Name: "b2", InputSchema: map[string]any{"type": "object"}}, h)
	start := time.Now()
	require.Eventually(t, func() bool {
		tools, err := UpstreamTools(context.Background(), cs)
		if err != nil {
			return false
		}
		for _, tool := range tools {
			if tool.Name == "b2" {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the quick upstream's new tool is served while the slow one is listed")
	assert.Less(t, time.Since(start), 5*time.Second)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "b2"})
	require.NoError(t, err)
	assert.Equal(t, "ok", text(t, res))
}
