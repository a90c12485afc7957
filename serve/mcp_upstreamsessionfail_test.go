package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
