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

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestAnEndedSessionsRunLedgerIsDropped: every MCP session without
// X-Agentc-Run left its run's ledger (and what the store remembers of its
// settlements) in the shared store for a day after it was deleted,
// though no client can name its run again. The ledger goes with the
// session; a named run's stays (its run may go on in another session or
// replica), and so does the ledger of a session still open.
func TestAnEndedSessionsRunLedgerIsDropped(t *testing.T) {
	url := storetest.ServerURL(t, storetest.RedisEnv)
	upstream, _ := inProcessUpstream(t)
	f := startFleet(t, "redis", url, 1, fmt.Sprintf(`
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
chains: tool: [{use: "meter", name: "runcalls", scope: "run", budget: calls: 5, store: "shared"}]
`, sha("agent-key"), upstream))
	st, err := redis.Open(context.Background(), url, f.prefix)
	require.NoError(t, err)
	defer st.Close()
	ledgers := func(run string) []string {
		keys, err := st.Client().Keys(context.Background(), st.Prefix()+"*meter/tool/runcalls/run/*"+run+"*").Result()
		require.NoError(t, err)
		return keys
	}
	lookup := func(cs *mcp.ClientSession) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
	}
	ended := connectProxy(t, f.replicas[0].url, "agent-key", nil)
	open := connectProxy(t, f.replicas[0].url, "agent-key", nil)
	named := connectProxy(t, f.replicas[0].url, "agent-key", map[string]string{RunHeader: "case-4"})
	for _, cs := range []*mcp.ClientSession{ended, open, named} {
		lookup(cs)
	}
	require.NotEmpty(t, ledgers("mcp-"+ended.ID()))
	require.NotEmpty(t, ledgers("case-4"))
	require.NoError(t, ended.Close())
	require.NoError(t, named.Close())
	assert.Eventually(t, func() bool { return len(ledgers("mcp-"+ended.ID())) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the ended session's run ledger is dropped")
	assert.NotEmpty(t, ledgers("mcp-"+open.ID()), "an open session's ledger stays")
	assert.NotEmpty(t, ledgers("case-4"), "a named run's ledger stays")
	lookup(open)
}

// TestASessionsRunEndsAfterItsCallsInFlight: a session deleted while one
// of its calls runs has its run ended after the call has settled, not
// before: the settlement would write the ledger back, kept for a day.
func TestASessionsRunEndsAfterItsCallsInFlight(t *testing.T) {
	url := storetest.ServerURL(t, storetest.RedisEnv)
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	audit := &runtime.MemoryAudit{}
	f := startFleet(t, "redis", url, 1, fmt.Sprintf(`
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
chains: tool: [{use: "audit", trail: "logical"}, {use: "meter", name: "runcalls", scope: "run", budget: calls: 5, store: "shared"}]
`, sha("agent-key"), ts.URL), func(o *Options) { o.Deps.Audit = audit })
	st, err := redis.Open(context.Background(), url, f.prefix)
	require.NoError(t, err)
	defer st.Close()
	cs := connectProxy(t, f.replicas[0].url, "agent-key", nil)
	run := "mcp-" + cs.ID()
	ledgers := func() []string {
		keys, err := st.Client().Keys(context.Background(), st.Prefix()+"*meter/tool/runcalls/run/*"+run+"*").Result()
		require.NoError(t, err)
		return keys
	}
	go func() { _, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow"}) }()
	<-started
	require.NotEmpty(t, ledgers(), "the call in flight holds its reservation")
	// The session is deleted while its call runs.
	del, err := http.NewRequest(http.MethodDelete, f.replicas[0].url+"/mcp", nil)
	require.NoError(t, err)
	del.Header.Set("Mcp-Session-Id", cs.ID())
	deleted := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: bearer{key: "agent-key"}}).Do(del)
		if err == nil {
			err = resp.Body.Close()
		}
		deleted <- err
	}()
	close(release)
	require.NoError(t, <-deleted)
	require.Eventually(t, func() bool {
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "slow" {
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the call ends, settled")
	assert.Eventually(t, func() bool { return len(ledgers()) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the run ends after its call: its ledger is not written back")
}
