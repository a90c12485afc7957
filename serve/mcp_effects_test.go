package serve

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/agentc-dev/agentc/runtime"
)

// droppingUpstream serves a go-sdk MCP server whose tools count their
// executions: charge (no annotations), lookup (readOnlyHint), upsert
// (idempotentHint) and declared (no annotations; the policy declares it
// read-only). The first call of each tool named in drop runs, and then its
// connection is closed before the response: the call was sent and acted,
// and its outcome is lost.
func droppingUpstream(t *testing.T, drop ...string) (*httptest.Server, map[string]*atomic.Int64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	runs := map[string]*atomic.Int64{}
	type in struct {
		ID string `json:"id"`
	}
	for name, ann := range map[string]*mcp.ToolAnnotations{
		"charge":   nil,
		"lookup":   {ReadOnlyHint: true},
		"upsert":   {IdempotentHint: true},
		"declared": nil,
	} {
		n := &atomic.Int64{}
		runs[name] = n
		mcp.AddTool(srv, &mcp.Tool{Name: name, Annotations: ann},
			func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
				n.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + a.ID}}}, nil, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	dropped := map[string]bool{}
	for _, n := range drop {
		dropped[n] = false
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		mu.Lock()
		done, ok := dropped[msg.Params.Name]
		cut := msg.Method == "tools/call" && ok && !done
		if cut {
			dropped[msg.Params.Name] = true
		}
		mu.Unlock()
		if !cut {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r) // the tool runs; its answer is lost
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(ts.Close)
	return ts, runs
}

const effectsPolicy = `package gw

keys: agent: {sha256: "%s", tenant: "bank"}
mcp: servers: bank: url: "%s"
tools: declared: {}
chains: tool: [
	{use: "retry", max_attempts: 3, initial_delay: "1ms", max_delay: "1ms"},
	{use: "idempotent", lease_ttl: "200ms"},
	{use: "audit", trail: "attempts"},
]
`

// TestMCPToolEffectsFollowTheirAnnotations: an MCP tool whose connection
// drops after the call was sent is run again by a retry only when its
// annotations say it is read-only or idempotent, or the policy declares it
// read-only (the policy's declaration wins); any other (no annotations)
// ran once, is reported in doubt, recorded in doubt by the
// audit layer, and kept in doubt by the idempotent layer, so a duplicate
// does not run it either.
func TestMCPToolEffectsFollowTheirAnnotations(t *testing.T) {
	upstream, runs := droppingUpstream(t, "charge", "lookup", "upsert", "declared")
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{
		Source: cueSource(writePolicy(t, fmt.Sprintf(effectsPolicy, sha("agent-key"), upstream.URL))),
		Deps:   runtime.Deps{Audit: audit},
	})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "pay-1"})
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"id": "A1"}})
		require.NoError(t, err)
		return res
	}

	for _, name := range []string{"lookup", "upsert", "declared"} {
		res := call(name)
		require.False(t, res.IsError, "%s: %s", name, text(t, res))
		assert.Equal(t, name+" A1", text(t, res))
		assert.EqualValues(t, 2, runs[name].Load(), "%s is safe to run again: retried after the lost answer", name)
	}

	for _, name := range []string{"charge"} {
		res := call(name)
		require.True(t, res.IsError, name)
		assert.Contains(t, text(t, res), "may have run", name)
		assert.EqualValues(t, 1, runs[name].Load(), "%s may have acted: not run again", name)
		var outcome *runtime.AuditRecord
		for _, r := range audit.Records() {
			if r.Tool == name && r.Phase == runtime.PhaseOutcome {
				outcome = &r
			}
		}
		require.NotNil(t, outcome, name)
		assert.Equal(t, runtime.DecisionInDoubt, outcome.Decision, name)
	}

	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="in_doubt",tool="charge"} 1`)

	// The same call again, once the idempotent layer's lease has expired:
	// the call is in doubt, not run again.
	assert.Eventually(t, func() bool {
		res := call("charge")
		return res.IsError && bytes.Contains([]byte(text(t, res)), []byte("is in doubt"))
	}, 3*1e9, 50*1e6)
	assert.EqualValues(t, 1, runs["charge"].Load(), "the duplicate does not run the charge")
}

// TestMCPCallNeverSentIsRetried: an upstream that refuses the connection
// never saw the call, so a retry tries a side-effecting tool again, and the
// failure is transient, not in doubt.
func TestMCPCallNeverSentIsRetried(t *testing.T) {
	upstream, _ := droppingUpstream(t)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{
		Source: cueSource(writePolicy(t, fmt.Sprintf(effectsPolicy, sha("agent-key"), upstream.URL))),
		Deps:   runtime.Deps{Audit: audit},
	})
	// The upstream goes away: new connections are refused.
	require.NoError(t, upstream.Listener.Close())
	upstream.CloseClientConnections()
	// The session's stream breaks with its connections; a call sent in
	// the moment before the proxy sees it end cannot tell the session's
	// failure from one after it was written (in doubt, as it should be).
	// Here the call starts once the proxy has seen it: every attempt opens
	// a new session, refused before anything is sent.
	up := s.srv.cur.Load().mcp.servers["bank"]
	up.mu.Lock()
	ended := up.main.ended
	up.mu.Unlock()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not see its upstream session end")
	}
	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "pay-2"})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"id": "A2"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.NotContains(t, text(t, res), "may have run")
	assert.NotContains(t, text(t, res), "did not run the call again")
	var attempts []int
	for _, r := range audit.Records() {
		if r.Tool == "charge" && r.Phase == runtime.PhaseOutcome {
			attempts = append(attempts, r.Attempts)
			assert.NotEqual(t, runtime.DecisionInDoubt, r.Decision)
		}
	}
	assert.Equal(t, []int{1, 2, 3}, attempts, "each refused attempt is tried again")
}
