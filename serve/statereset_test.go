package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyArgsPolicy is a policy deduplicating refunds per keyArgs.
func keyArgsPolicy(upstream, keyArgs string) string {
	return fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent", key_args: %s}]
`, sha("agent-key"), upstream, keyArgs)
}

// TestReloadThatResetsIdempotencyIsRefused: a reload that changes
// idempotent's key_args would run a refund made before it again when it is
// retried; it is refused, counted and logged, the running policy serving
// on, unless AllowStateReset, which applies it (and the retry runs again).
func TestReloadThatResetsIdempotencyIsRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			upstream, refunds := inProcessUpstream(t)
			dir := writePolicy(t, keyArgsPolicy(upstream, `["order_id"]`))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, AllowStateReset: allow})
			refund := func(run string) { refundOnce(t, s.url, run) }
			refund("first")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(keyArgsPolicy(upstream, `["order_id", "amount"]`)), 0o644))
			err := s.srv.Reload(context.Background())
			metrics := scrape(t, s.url)
			logs := s.logs.String()
			assert.Contains(t, logs, "the policy change leaves shared state behind")
			assert.Contains(t, logs, `key_args [\"order_id\"] → [\"order_id\",\"amount\"]`)
			assert.Contains(t, logs, "calls of refund made before the change run again if repeated")
			refund("retry")
			if !allow {
				require.ErrorIs(t, err, ErrStateReset)
				assert.Contains(t, err.Error(), "refund (key_args)")
				assert.Contains(t, logs, "reload refused; still serving the previous policy")
				assert.Contains(t, metrics, `agentc_serve_reloads_total{result="refused"} 1`)
				assert.Contains(t, metrics, `agentc_serve_reloads_total{result="failed"} 0`)
				assert.Contains(t, metrics, "agentc_serve_policy_generation 1")
				assert.EqualValues(t, 1, refunds.Load(), "the retry was deduplicated by the policy still serving")
				return
			}
			require.NoError(t, err)
			assert.Contains(t, logs, "applying a change that starts idempotency records afresh")
			assert.Contains(t, metrics, `agentc_serve_reloads_total{result="ok"} 1`)
			assert.EqualValues(t, 2, refunds.Load(), "under the new keys the retry ran again")
		})
	}
}

// TestReloadKeepingTheKeysIsQuiet: a change that keeps the state's keys
// (the ttl) reloads without a word about state.
func TestReloadKeepingTheKeysIsQuiet(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	dir := writePolicy(t, keyArgsPolicy(upstream, `["order_id"]`))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	src := strings.Replace(keyArgsPolicy(upstream, `["order_id"]`), `use: "idempotent",`, `use: "idempotent", ttl: "1h",`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	assert.NotContains(t, s.logs.String(), "shared state")
}
