package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestMCPUpstreamSessionFailedOpenHoldsNoSlot: a caller's upstream session
// that could not be opened (the server refused the connection) does not
// count toward max_sessions: once the server answers, another client's
// call gets a session, and the gauge counts only the session open.
func TestMCPUpstreamSessionFailedOpenHoldsNoSlot(t *testing.T) {
	up := newNoteServer(t)
	var down atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(ts.URL, `, max_sessions: 1`))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	beta := connectProxy(t, s.url, "beta-key", nil)

	down.Store(true)
	res, err := alpha.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_get_note", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError, "the upstream refused alpha's session")
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 0`)

	down.Store(false)
	assert.Equal(t, "(none)", callText(t, beta, "web_get_note", nil), "beta gets the slot alpha's failed session did not take")
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 1`)
	assert.Eventually(t, func() bool { return up.sessions() == 2 }, 10*time.Second, 5*time.Millisecond, "the listing session and beta's")
}

// TestMCPUpstreamSessionOfATenantInClientScopeIdles: a call made outside
// an MCP client session (a program running the tool chain itself) on a
// server whose sessions are per client gets its tenant's session, which
// closes after idle without a call as a tenant's session does.
func TestMCPUpstreamSessionOfATenantInClientScopeIdles(t *testing.T) {
	up := newNoteServer(t)
	ups, err := connectUpstreams(context.Background(), map[string]plan.MCPServer{"web": {URL: up.url}}, t.TempDir(), nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil, 20*time.Millisecond, nil)
	require.NoError(t, err)
	t.Cleanup(ups.close)
	web := ups.servers["web"]
	require.Equal(t, scopeClient, web.scope)
	conn, release, err := web.take(context.Background())
	require.NoError(t, err)
	_, err = conn.session(context.Background())
	require.NoError(t, err)
	release()
	require.Eventually(t, func() bool {
		web.mu.Lock()
		defer web.mu.Unlock()
		return len(web.scoped) == 0
	}, 10*time.Second, 5*time.Millisecond, "the tenant's session idled out")
	assert.Eventually(t, func() bool { return up.sessions() == 1 }, 10*time.Second, 5*time.Millisecond, "only the listing session is left")
}

// TestMCPUpstreamSessionFailedOpenAfterItsCallerLeft: a caller's session
// whose opening fails after the call waiting for it gave up is dropped
// then, not kept under max_sessions.
func TestMCPUpstreamSessionFailedOpenAfterItsCallerLeft(t *testing.T) {
	up := newNoteServer(t)
	var down atomic.Bool
	held, free := make(chan struct{}, 1), make(chan struct{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			select {
			case held <- struct{}{}:
			default:
			}
			<-free
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ups, err := connectUpstreams(context.Background(), map[string]plan.MCPServer{"web": {URL: ts.URL}}, t.TempDir(), nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil, time.Hour, nil)
	require.NoError(t, err)
	t.Cleanup(ups.close)
	web := ups.servers["web"]

	down.Store(true)
	ctx, cancel := context.WithCancel(withUpstreamCaller(context.Background(), upstreamCaller{session: "s1", tenant: "alpha"}))
	conn, release, err := web.take(ctx)
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() {
		_, err := conn.session(ctx)
		errs <- err
	}()
	<-held
	cancel()
	require.ErrorIs(t, <-errs, context.Canceled)
	release()
	web.mu.Lock()
	d := conn.dialing
	web.mu.Unlock()
	require.NotNil(t, d, "the session is still being opened")
	close(free)
	<-d.done
	web.mu.Lock()
	defer web.mu.Unlock()
	assert.Empty(t, web.scoped, "the session that failed to open is not kept")
}
