package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// mute is an upstream that can be made to forget its sessions and never
// answer an initialize again, as a server that restarted into a hang.
type mute struct {
	h      atomic.Value
	silent atomic.Bool
	// inits counts the initialize requests it left unanswered.
	inits atomic.Int64
}

func muteUpstream(t *testing.T) (*mute, string) {
	t.Helper()
	m := &mute{}
	m.h.Store(echoHandler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.silent.Load() && r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte(`"method":"initialize"`)) {
				m.inits.Add(1)
				<-r.Context().Done()
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		m.h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// hang makes the upstream forget its sessions and answer no initialize.
func (m *mute) hang() {
	m.silent.Store(true)
	m.h.Store(echoHandler())
}

func echoHandler() http.Handler {
	var echo countingEcho
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, echo.handle)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// TestMCPUpstreamThatNeverAnswersInitialize: an upstream whose session
// ended and that never answers the initialize of a new one holds no call
// past its own deadline: a call with a 1 s deadline ends in about 1 s while
// another waits for the same connection, the server's other users (the
// list served) do not wait for it, and another server's calls are served.
func TestMCPUpstreamThatNeverAnswersInitialize(t *testing.T) {
	m, upstream := muteUpstream(t)
	other, _ := inProcessUpstream(t)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: {mute: {url: %q}, pay: {url: %q}}
chains: tool: [{use: "audit", trail: "logical"}]
`, upstream, other))), Deps: runtime.Deps{Audit: audit}, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.Equal(t, "ran ping", text(t, res))

	m.hang()
	// The call that finds the session gone.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)

	// A call with no deadline of its own starts connecting again.
	first, cancelFirst := context.WithCancel(ctx)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		_, _ = cs.CallTool(first, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	}()
	defer func() { cancelFirst(); <-firstDone }()
	require.Eventually(t, func() bool { return m.inits.Load() == 1 }, 5*time.Second, 10*time.Millisecond)

	outcomes := func() int {
		n := 0
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "ping" {
				n++
			}
		}
		return n
	}
	before := outcomes()
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = cs.CallTool(dctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.Error(t, err)
	require.Eventually(t, func() bool { return outcomes() == before+1 }, 2*time.Second, 10*time.Millisecond,
		"the proxy ends the call at its deadline, not when the connection gives up")
	assert.Less(t, time.Since(start), 2500*time.Millisecond)

	g := s.srv.acquire()
	served := make(chan bool, 1)
	go func() { served <- g.mcp.tools["ping"].up.serves(g.mcp.tools["ping"]) }()
	select {
	case <-served:
	case <-time.After(time.Second):
		t.Fatal("the server's list waits for the connection")
	}
	g.release()

	start = time.Now()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	assert.Less(t, time.Since(start), time.Second, "another server's calls do not wait")
	assert.EqualValues(t, 1, m.inits.Load(), "one connection is opened at a time")
}
