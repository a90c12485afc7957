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

// TestMCPRefreshGivesUpTheLockWhenCloseStarts: Close holds the lock that
// builds generations while the calls in flight finish, and a call may be
// waiting for its upstream's tools to be listed again: the listing, done,
// waits for that lock. It gives up once Close has started, so the call is
// refused and Close returns.
func TestMCPRefreshGivesUpTheLockWhenCloseStarts(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "a", InputSchema: map[string]any{"type": "object"}}, h)
	lists := holdLists(srv)
	policy := fmt.Sprintf("package gw\n\nkeys: agent: {sha256: %q}\nmcp: servers: up: url: %q\n", sha("agent-key"), serveUpstream(t, srv))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	t.Cleanup(lists.free) // before the server closes (cleanups run last first)

	// The upstream says its tools changed and its listing is held: a call
	// of its tool waits for it.
	lists.hold()
	srv.AddTool(&mcp.Tool{Name: "b", InputSchema: map[string]any{"type": "object"}}, h)
	lists.waitHeld(t)
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "a"})
		called <- err
	}()
	up := s.srv.cur.Load().mcp.servers["up"]
	require.Eventually(t, func() bool {
		return listWaits(s, "up") == 1
	}, 10*time.Second, time.Millisecond, "the call waits for the listing")

	// Close takes the lock and waits for the call; the listing, freed,
	// then waits for the lock.
	closed := make(chan error, 1)
	go func() { closed <- s.srv.Close() }()
	require.Eventually(t, s.srv.closed.Load, 10*time.Second, time.Millisecond)
	lists.free()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return: the listing held the call it waits for")
	}
	require.Error(t, <-called, "the call is refused: the server is shutting down")
	up.mu.Lock()
	defer up.mu.Unlock()
	assert.Empty(t, up.served, "the listing given up serves nothing")
}
