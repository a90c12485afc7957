package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPUpstreamRedirectKeepsItsCredentials: an upstream URL that
// redirects elsewhere (a compromised server, an open redirect on it) had
// the proxy follow, its headers (the credential) added to the request to
// the other host and a call's arguments posted there again (307). A
// redirect to another origin is refused; one within the server's origin
// (/mcp to /mcp/) is followed.
func TestMCPUpstreamRedirectKeepsItsCredentials(t *testing.T) {
	var stolen atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "mcp-s3cret") {
			stolen.Add(1)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)
	policy := `package gw

keys: agent: {sha256: %q}
mcp: servers: pay: {url: %q, headers: Authorization: "Bearer ${PAY_MCP_TOKEN}"}
`
	env := func(k string) (string, bool) { return "mcp-s3cret", k == "PAY_MCP_TOKEN" }
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, fmt.Sprintf(policy, sha("agent-key"), redirecting.URL))),
		Logger: slog.New(slog.DiscardHandler), LookupEnv: env})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirect")
	assert.NotContains(t, err.Error(), "mcp-s3cret")
	assert.Zero(t, stolen.Load(), "the credential never reaches another host")

	// Within the server's origin, the redirect is followed.
	upstream, refunds := inProcessUpstream(t)
	mux := http.NewServeMux()
	mux.Handle("/moved/", http.StripPrefix("/moved", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer mcp-s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		u, _ := url.Parse(upstream)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	})))
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved/", http.StatusPermanentRedirect)
	})
	same := httptest.NewServer(mux)
	t.Cleanup(same.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(policy, sha("agent-key"), same.URL+"/old"))), LookupEnv: env, WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 5}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.EqualValues(t, 1, refunds.Load())
}
