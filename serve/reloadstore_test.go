package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// storedRefundPolicy deduplicates refunds in the declared store "state",
// declared as decl, behind a guard named guard (a change that leaves the
// store alone).
func storedRefundPolicy(upstream, decl, guard string) string {
	return fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
stores: state: %s
chains: tool: [
	{use: "guard", name: "%s", deny: "size(tool.name) > 200"},
	{use: "idempotent", store: "state", key_args: ["order_id"]},
]
`, sha("agent-key"), upstream, decl, guard)
}

// refundOnce calls refund on order A1 through the proxy in a run of its own.
func refundOnce(t *testing.T, base, run string) {
	t.Helper()
	cs := connectProxy(t, base, "agent-key", map[string]string{RunHeader: run})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	require.NoError(t, cs.Close())
}

// TestReloadKeepsADeclaredStore: a reload whose change leaves a declared
// store's declaration alone keeps the store's state: a refund retried after
// it replays instead of running again, for a memory store as for a sqlite
// file.
func TestReloadKeepsADeclaredStore(t *testing.T) {
	for _, decl := range []string{`{kind: "memory"}`, `{kind: "sqlite", path: "state.db"}`} {
		t.Run(strings.Fields(decl)[1], func(t *testing.T) {
			upstream, refunds := inProcessUpstream(t)
			dir := writePolicy(t, storedRefundPolicy(upstream, decl, "short_names"))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
			refundOnce(t, s.url, "first")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(storedRefundPolicy(upstream, decl, "names_short")), 0o644))
			require.NoError(t, s.srv.Reload(context.Background()))
			refundOnce(t, s.url, "retry")
			assert.EqualValues(t, 1, refunds.Load(), "the retry after the reload replayed the first refund")
			assert.NotContains(t, s.logs.String(), "shared state")
		})
	}
}

// TestReloadsKeepOneConnectionPool: 20 reloads over a redis or postgres
// store hold one store open, not one per generation, and leave no
// goroutine behind; the retried refund replays throughout.
func TestReloadsKeepOneConnectionPool(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			prefix := storetest.Prefix(t)
			if kind == "postgres" {
				t.Cleanup(func() { dropSchema(t, url, prefix) })
			}
			upstream, refunds := inProcessUpstream(t)
			decl := fmt.Sprintf(`{kind: "%s", url: "%s", prefix: "%s"}`, kind, url, prefix)
			dir := writePolicy(t, storedRefundPolicy(upstream, decl, "g0"))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
			refundOnce(t, s.url, "first")
			reload := func(i int) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(storedRefundPolicy(upstream, decl, fmt.Sprintf("g%d", i))), 0o644))
				require.NoError(t, s.srv.Reload(context.Background()))
				refundOnce(t, s.url, fmt.Sprintf("retry-%d", i))
			}
			reload(1)
			before := goruntime.NumGoroutine()
			for i := 2; i <= 21; i++ {
				reload(i)
			}
			assert.Equal(t, 1, s.srv.stores.Open(), "one store open across the reloads")
			assert.EqualValues(t, 1, refunds.Load(), "every retry replayed the first refund")
			assert.Eventually(t, func() bool { return goruntime.NumGoroutine() <= before+5 }, 10*time.Second, 50*time.Millisecond,
				"goroutines: %d before 20 reloads, %d after", before, goruntime.NumGoroutine())
			t.Logf("goroutines: %d before 20 reloads, %d after", before, goruntime.NumGoroutine())
			require.NoError(t, s.stop())
			assert.Equal(t, 0, s.srv.stores.Open(), "the last generation closed the store")
		})
	}
}

// TestReloadKeepsTheUndeclaredDefaultStore: a policy that declares no store
// keeps its idempotency records in the process's memory, which a reload
// keeps too.
func TestReloadKeepsTheUndeclaredDefaultStore(t *testing.T) {
	s, refunds, err := refundThenReload(t, false, func(src string) string {
		return strings.Replace(src, `use: "idempotent",`, `use: "idempotent", ttl: "1h",`, 1)
	})
	require.NoError(t, err)
	refundOnce(t, s.url, "retry")
	assert.EqualValues(t, 1, refunds.Load(), "the retry after the reload replayed the first refund")
}
