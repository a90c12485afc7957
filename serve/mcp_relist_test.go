package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silentUpstream serves srv without a standalone event stream (its GET is
// refused, as the specification lets a server do), so the proxy never
// hears its notifications/tools/list_changed; lists counts its tools/list
// requests.
func silentUpstream(t *testing.T, srv *mcp.Server) (string, *atomic.Int64) {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return counted(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, "no event stream", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}), `"tools/list"`)
}

// counted serves h on a loopback port, counting the requests whose body
// holds needle.
func counted(t *testing.T, h http.Handler, needle string) (string, *atomic.Int64) {
	t.Helper()
	n := &atomic.Int64{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte(needle)) {
			n.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, n
}

// TestMCPUnknownToolListsAgain: a call of a tool the proxy does not list
// (the upstream added it after the last list and did not say so) lists the
// upstream again once before it is refused, so the new tool is scanned,
// served and called; a storm of calls of unknown tools lists it at most
// once per relistEvery; a tool the new list dropped is refused without
// reaching the upstream.
func TestMCPUnknownToolListsAgain(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	srv := mcp.NewServer(&mcp.Implementation{Name: "quiet", Version: "1"}, nil)
	var echo countingEcho
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look an order up."}, echo.handle)
	url, lists := silentUpstream(t, srv)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(scanPolicy, sha("agent-key"), url, ""))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	ctx := context.Background()
	require.Equal(t, map[string]string{"lookup": "Look an order up."}, listedDescriptions(t, cs))
	loaded := lists.Load()

	// The upstream adds a tool without telling: the first call of it lists
	// the upstream again and runs, on the client's upstream session, which
	// is listed as it is opened.
	mcp.AddTool(srv, &mcp.Tool{Name: "stock", Description: "Check the stock of an item."}, echo.handle)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, loaded, lists.Load(), "the proxy heard nothing of the change")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stock", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "ran stock", text(t, res))
	loaded++ // the client's upstream session
	assert.Equal(t, loaded+1, lists.Load())
	assert.Equal(t, map[string]string{"lookup": "Look an order up.", "stock": "Check the stock of an item."}, listedDescriptions(t, cs))

	// Calls of tools nobody serves are refused; within relistEvery they do
	// not list the upstream again, however many they are.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fmt.Sprintf("nosuch%d", i), Arguments: map[string]any{}})
			assert.ErrorContains(t, err, "unknown tool")
		}()
	}
	wg.Wait()
	assert.Equal(t, loaded+1, lists.Load(), "unknown tools list the upstream at most once per relistEvery")

	// Once relistEvery has passed, an unknown call lists it again: the
	// tool it dropped meanwhile is refused, never sent.
	relisted := time.Now()
	defer func(d time.Duration) { relistEvery = d }(relistEvery)
	relistEvery = 50 * time.Millisecond
	time.Sleep(time.Until(relisted.Add(relistEvery)))
	srv.RemoveTools("lookup")
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `unknown tool "nosuch"`)
	assert.Equal(t, loaded+2, lists.Load())
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `unknown tool "lookup"`)
	assert.Zero(t, echo.count("lookup"))
	assert.Equal(t, map[string]string{"stock": "Check the stock of an item."}, listedDescriptions(t, cs))
}

// TestMCPFlappingUpstreamListIsPaced: an upstream that says its tools
// changed, and changes them, every 15 ms had the proxy build,
// scan and install a generation for each listing (61 a second, each
// telling every MCP client to list its tools again). Listings for changes
// come at most one a refreshEvery; the last change is served.
func TestMCPFlappingUpstreamListIsPaced(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "x", Description: "version 0", InputSchema: map[string]any{"type": "object"}}, h)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
`, sha("agent-key"), ts.URL))), WatchInterval: -1})
	g0 := s.srv.cur.Load().n
	last := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		last++
		srv.AddTool(&mcp.Tool{Name: "x", Description: fmt.Sprint("version ", last), InputSchema: map[string]any{"type": "object"}}, h)
		time.Sleep(15 * time.Millisecond) // past the SDK's delay of a change's notification
	}
	cs := connectProxy(t, s.url, "agent-key", nil)
	require.Eventually(t, func() bool {
		tools, err := UpstreamTools(context.Background(), cs)
		return err == nil && len(tools) == 1 && tools[0].Description == fmt.Sprint("version ", last)
	}, 5*time.Second, 20*time.Millisecond, "the last change is served")
	assert.LessOrEqual(t, int(s.srv.cur.Load().n-g0), 3, "a generation at most a refreshEvery")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, "ok", text(t, res))
}
