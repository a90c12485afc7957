package serve

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// replicaPolicy is a policy of two replicas sharing store "shared" (%s the
// store's kind and url, %s its prefix or schema) whose tool chain is %s.
const replicaPolicy = `package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
stores: shared: {kind: "%s", url: "%s", prefix: "%s"}
settings: replicas: 2
chains: tool: [%s]
`

// sharedStoreURLs returns the test servers that are set, by store kind.
func sharedStoreURLs(t *testing.T) map[string]string {
	out := map[string]string{}
	for kind, env := range map[string]string{"redis": storetest.RedisEnv, "postgres": storetest.PostgresEnv} {
		if u := os.Getenv(env); u != "" {
			out[kind] = u
		}
	}
	if len(out) == 0 {
		t.Skipf("set %s or %s to run replicas over a shared store", storetest.RedisEnv, storetest.PostgresEnv)
	}
	return out
}

// TestAReplicaThatSawARunGoIdleKeepsItsSharedState: a named run whose
// requests the load balancer sends to replica A, then only to replica B, is
// idle on A, not over. A's idle sweep must not drop the run's ledger and
// bucket in the store every replica shares: B would start the run's budget
// and rate limit afresh.
func TestAReplicaThatSawARunGoIdleKeepsItsSharedState(t *testing.T) {
	urls := sharedStoreURLs(t)
	upstream, _ := inProcessUpstream(t)
	for kind, url := range urls {
		for name, tc := range map[string]struct{ layer, refusal string }{
			"meter":      {`{use: "meter", scope: "run", budget: calls: 1, store: "shared"}`, "budget"},
			"rate_limit": {`{use: "rate_limit", rate: 1, per: "1h", mode: "reject", scope: "run", store: "shared"}`, "rate limit of 1 per 1h0m0s exceeded"},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				prefix := storetest.Prefix(t)
				if kind == "postgres" {
					t.Cleanup(func() { dropSchema(t, url, prefix) })
				}
				dir := writePolicy(t, fmt.Sprintf(replicaPolicy, sha("agent-key"), upstream, kind, url, prefix, tc.layer))
				a := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, RunIdle: 100 * time.Millisecond})
				b := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, RunIdle: time.Hour})
				header := map[string]string{RunHeader: "case-9"}
				lookup := func(s *served) *mcp.CallToolResult {
					res, err := connectProxy(t, s.url, "agent-key", header).CallTool(context.Background(),
						&mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
					require.NoError(t, err)
					return res
				}
				res := lookup(a)
				require.False(t, res.IsError, text(t, res))
				// A ends the run it has not seen for 100 ms.
				require.Eventually(t, func() bool {
					a.srv.runs.mu.Lock()
					defer a.srv.runs.mu.Unlock()
					return len(a.srv.runs.runs) == 0
				}, 5*time.Second, 10*time.Millisecond)
				time.Sleep(100 * time.Millisecond) // its layers are told after the tracker forgets it
				res = lookup(b)
				assert.True(t, res.IsError, "the run's second call went through replica B: %s", text(t, res))
				assert.Contains(t, text(t, res), tc.refusal)
			})
		}
	}
}

// dropSchema drops the PostgreSQL schema a test's replicas created.
func dropSchema(t *testing.T, url, schema string) {
	s, err := postgres.Open(context.Background(), url, schema)
	if err != nil {
		t.Logf("drop schema %s: %v", schema, err)
		return
	}
	defer s.Close()
	_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
}
