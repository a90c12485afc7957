package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestAWaitingDuplicateCutByTheShutdownDidNotRun: a side-effecting call
// runs upstream from one replica; a duplicate of it under the same
// Idempotency-Key, sent to another replica sharing the idempotency store,
// waits for its claim. That replica shuts down and cuts the duplicate,
// which only waited: its answer asks for the request again, its audit
// outcome is not in doubt (the answer and the trail agree), and its tool
// meter does not charge it. The call that ran ends as it would have.
func TestAWaitingDuplicateCutByTheShutdownDidNotRun(t *testing.T) {
	started, release := make(chan struct{}, 2), make(chan struct{})
	up := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "pay", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
			case <-release:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(ts.Close)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	policy := writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
stores: shared: {kind: "sqlite", path: %q}
chains: tool: [
	{use: "meter", name: "tool_calls", scope: "global", budget: calls: 100},
	{use: "audit"},
	{use: "idempotent", store: "shared"},
]
`, sha("agent-key"), ts.URL, filepath.Join(t.TempDir(), "state.db")))
	replica := func() (*served, *runtime.MemoryAudit, runtime.LedgerReader) {
		audit := &runtime.MemoryAudit{}
		s := startServer(t, Options{Source: cueSource(policy), Deps: runtime.Deps{Audit: audit},
			ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
		g := s.srv.acquire()
		defer g.release()
		return s, audit, g.pl.Layers(plan.StageTool)[0].Middleware.(runtime.LedgerReader)
	}
	a, aTrail, aLedger := replica()
	b, bTrail, bLedger := replica()
	key := map[string]string{"Idempotency-Key": "pay-C"}
	args := map[string]any{"order_id": "C"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(cs *mcp.ClientSession, answer chan<- string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: args})
		if assert.NoError(t, err) {
			answer <- text(t, res)
		}
	}
	ran, waited := make(chan string, 1), make(chan string, 1)
	go call(connectProxy(t, a.url, "agent-key", key), ran)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the call did not reach the upstream")
	}
	// The duplicate is posted on its own, its answer read from its
	// response: an SDK client fails a call whose session's event stream
	// the shutdown closed first, the answer unread.
	var sid atomic.Value
	dup, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: b.url + "/mcp", HTTPClient: &http.Client{Transport: sessionOf{bearer{key: "agent-key"}, &sid}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dup.Close() })
	go func() {
		req, err := mcpRequest(ctx, b.url, "agent-key", sid.Load().(string),
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pay","arguments":{"order_id":"C"}}}`)
		if !assert.NoError(t, err) {
			return
		}
		req.Header.Set("Idempotency-Key", "pay-C")
		resp, err := http.DefaultClient.Do(req)
		if !assert.NoError(t, err) {
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		assert.NoError(t, err)
		waited <- string(body)
	}()
	require.Eventually(t, func() bool { return len(phases(bTrail, runtime.PhaseIntent)) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the duplicate reaches the idempotent layer")

	require.NoError(t, b.stop())
	select {
	case answer := <-waited:
		assert.Contains(t, answer, `"isError":true`)
		assert.Contains(t, answer, `"text":"`+errShutdownCut.Error()+`"`, "the duplicate is asked to send the request again")
	case <-ctx.Done():
		t.Fatal("the duplicate got no answer")
	}
	outcomes := phases(bTrail, runtime.PhaseOutcome)
	require.Len(t, outcomes, 1)
	assert.Equal(t, runtime.DecisionFailed, outcomes[0].Decision, "the trail agrees with the answer: %s", outcomes[0].ErrorMessage)
	assert.Zero(t, bLedger.Ledger("").Calls, "the duplicate is not charged")

	unblock()
	select {
	case answer := <-ran:
		assert.Equal(t, "paid", answer)
	case <-ctx.Done():
		t.Fatal("the call that ran got no answer")
	}
	assert.Equal(t, []runtime.AuditDecision{runtime.DecisionOK}, decisions(phases(aTrail, runtime.PhaseOutcome)))
	assert.Equal(t, int64(1), aLedger.Ledger("").Calls)
	assert.Len(t, started, 0, "the duplicate never reached the upstream")
}

// decisions returns the decisions of records.
func decisions(records []runtime.AuditRecord) []runtime.AuditDecision {
	var out []runtime.AuditDecision
	for _, r := range records {
		out = append(out, r.Decision)
	}
	return out
}

// phases returns the records of trail of phase p.
func phases(trail *runtime.MemoryAudit, p runtime.AuditPhase) []runtime.AuditRecord {
	var out []runtime.AuditRecord
	for _, r := range trail.Records() {
		if r.Phase == p {
			out = append(out, r)
		}
	}
	return out
}
