package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
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

// refundThenReload serves keyArgsPolicy deduplicating on order_id, refunds
// order A1 once in run "first", writes the policy edit makes of it and
// reloads; it returns the server, the upstream's count of refunds and the
// reload's error.
func refundThenReload(t *testing.T, allow bool, edit func(string) string) (*served, *atomic.Int64, error) {
	t.Helper()
	upstream, refunds := inProcessUpstream(t)
	dir := writePolicy(t, keyArgsPolicy(upstream, `["order_id"]`))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, AllowStateReset: allow})
	refundOnce(t, s.url, "first")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(edit(keyArgsPolicy(upstream, `["order_id"]`))), 0o644))
	return s, refunds, s.srv.Reload(context.Background())
}

// TestReloadThatResetsIdempotencyIsRefused: a reload that changes
// idempotent's key_args would run a refund made before it again when it is
// retried; it is refused, counted and logged, the running policy serving
// on, unless AllowStateReset, which applies it (and the retry runs again).
func TestReloadThatResetsIdempotencyIsRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			s, refunds, err := refundThenReload(t, allow, func(src string) string {
				return strings.Replace(src, `key_args: ["order_id"]`, `key_args: ["order_id", "amount"]`, 1)
			})
			refund := func(run string) { refundOnce(t, s.url, run) }
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
			assert.Contains(t, logs, "while replicas still serve the previous policy on the same store a call sent through one of each, even a new one, runs on both",
				"the log says a mixed rollout runs new calls twice too")
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

// prefixedRefundPolicy is a policy serving the refunds of an MCP server under
// prefix, its side-effecting tool declared as tool, with chain as its
// tool chain.
func prefixedRefundPolicy(upstream, prefix, tool, chain string) string {
	return fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: {url: "%s", prefix: "%s"}
tools: %s: side_effecting: true
chains: tool: %s
`, sha("agent-key"), upstream, prefix, tool, chain)
}

// callRefund refunds order A1 through the tool named tool in run.
func callRefund(t *testing.T, base, run, tool string) {
	t.Helper()
	cs := connectProxy(t, base, "agent-key", map[string]string{RunHeader: run})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"order_id": "A1", "amount": 40}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	require.NoError(t, cs.Close())
}

// TestReloadThatLeavesIdempotencyBehindIsRefused: a reload that removes
// the idempotent layer, or changes the prefix of the MCP server whose tool
// it dedupes (the tool's name in its key), would run a refund made before
// it again when it is retried; it is refused like a change of key_args,
// unless AllowStateReset, which applies it (and the retry runs again).
func TestReloadThatLeavesIdempotencyBehindIsRefused(t *testing.T) {
	const dedup = `[{use: "log"}, {use: "idempotent", key_args: ["order_id"]}]`
	for _, tc := range []struct {
		name                string
		prefix, tool, chain string
		refusal, logged     string
	}{
		{"layer removed", "pay_", "pay_refund", `[{use: "log"}]`, "pay_refund (idempotent removed)", "idempotent of the baseline is removed"},
		{"prefix changed", "shop_", "shop_refund", dedup, `the tools of mcp server "pay" (mcp_servers.pay.prefix)`, `mcp_servers.pay.prefix \"pay_\" → \"shop_\"`},
	} {
		for _, allow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/allow=%v", tc.name, allow), func(t *testing.T) {
				upstream, refunds := inProcessUpstream(t)
				dir := writePolicy(t, prefixedRefundPolicy(upstream, "pay_", "pay_refund", dedup))
				s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, AllowStateReset: allow})
				callRefund(t, s.url, "first", "pay_refund")
				require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(prefixedRefundPolicy(upstream, tc.prefix, tc.tool, tc.chain)), 0o644))
				err := s.srv.Reload(context.Background())
				logs := s.logs.String()
				assert.Contains(t, logs, "the policy change leaves shared state behind")
				assert.Contains(t, logs, tc.logged)
				if !allow {
					require.ErrorIs(t, err, ErrStateReset)
					assert.Contains(t, err.Error(), tc.refusal)
					callRefund(t, s.url, "retry", "pay_refund")
					assert.EqualValues(t, 1, refunds.Load(), "the retry was deduplicated by the policy still serving")
					return
				}
				require.NoError(t, err)
				callRefund(t, s.url, "retry", tc.tool)
				assert.EqualValues(t, 2, refunds.Load(), "after the change the retry ran again")
			})
		}
	}
}

// TestReloadThatMovesAKeyToAnotherTenantIsRefused: the tenant of a
// virtual key is part of every key its calls' records are kept under; a
// reload that gives the key another tenant would run a refund made before
// it again when it is retried. It is refused like a change of key_args,
// unless AllowStateReset, which applies it (and the retry runs again).
func TestReloadThatMovesAKeyToAnotherTenantIsRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			s, refunds, err := refundThenReload(t, allow, func(src string) string {
				return strings.Replace(src, `tenant: "shop"`, `tenant: "store"`, 1)
			})
			logs := s.logs.String()
			assert.Contains(t, logs, "the policy change leaves shared state behind")
			assert.Contains(t, logs, `keys.agent.tenant \"shop\" → \"store\"`)
			refundOnce(t, s.url, "retry")
			if !allow {
				require.ErrorIs(t, err, ErrStateReset)
				assert.Contains(t, err.Error(), "refund (keys.agent.tenant)")
				assert.EqualValues(t, 1, refunds.Load(), "the retry was deduplicated by the policy still serving")
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, 2, refunds.Load(), "under the new tenant the retry ran again")
		})
	}
}

// TestReloadThatDeclaresKeysIsRefused: a policy without keys gives every
// caller no tenant; a reload that declares keys puts each caller's calls
// under its key's tenant, so a refund made before it runs again when it is
// retried after it. It is refused like a key given another tenant, unless
// AllowStateReset, which applies it (and the retry runs again).
func TestReloadThatDeclaresKeysIsRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			upstream, refunds := inProcessUpstream(t)
			keyed := keyArgsPolicy(upstream, `["order_id"]`)
			open := strings.Replace(keyed, fmt.Sprintf("keys: agent: {sha256: %q, tenant: \"shop\"}\n", sha("agent-key")), "", 1)
			require.NotEqual(t, keyed, open)
			dir := writePolicy(t, open)
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, AllowStateReset: allow})
			refundOnce(t, s.url, "first")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(keyed), 0o644))
			err := s.srv.Reload(context.Background())
			assert.Contains(t, s.logs.String(), `keys unset, calls without a tenant → set, calls under their key's tenant (\"shop\")`)
			refundOnce(t, s.url, "retry")
			if !allow {
				require.ErrorIs(t, err, ErrStateReset)
				assert.Contains(t, err.Error(), "refund (keys)")
				assert.EqualValues(t, 1, refunds.Load(), "the retry was deduplicated by the policy still serving")
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, 2, refunds.Load(), "under the key's tenant the retry ran again")
		})
	}
}

// TestReloadThatMovesAKeyToAnotherTenantResetsItsBudget: a meter with
// scope "key" keeps a ledger per tenant; a reload that gives the key
// another tenant starts its ledger at 0, so a spent budget is spent again.
// The reload is applied (a budget is not refused), and logged at the key's
// tenant.
func TestReloadThatMovesAKeyToAnotherTenantResetsItsBudget(t *testing.T) {
	txt := transcript(t, "openai", "text.sse")
	g := newGateway(t, `{use: "meter", scope: "key", budget: calls: 1}`, []reply{{body: txt}, {body: txt}, {body: txt}}, nil)
	ask := func() error {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	require.NoError(t, ask())
	var oe *openai.Error
	require.ErrorAs(t, ask(), &oe)
	require.Equal(t, 402, oe.StatusCode, "the tenant's budget is spent")
	src, err := os.ReadFile(filepath.Join(g.dir, "policy.cue"))
	require.NoError(t, err)
	moved := strings.Replace(string(src), `tenant: "acme"`, `tenant: "acme-eu"`, 1)
	require.NotEqual(t, string(src), moved)
	require.NoError(t, os.WriteFile(filepath.Join(g.dir, "policy.cue"), []byte(moved), 0o644))
	require.NoError(t, g.srv.Reload(context.Background()), "a budget started afresh is logged, not refused")
	logs := g.logs.String()
	assert.Contains(t, logs, "the policy change leaves shared state behind")
	assert.Contains(t, logs, `keys.app.tenant \"acme\" → \"acme-eu\"`)
	assert.Contains(t, logs, "what was spent before the change no longer counts against the budget")
	require.NoError(t, ask(), "under the new tenant the ledger starts at 0")
	assert.Equal(t, 2, g.oa.requests())
}

// TestReloadThatNarrowsIdempotentsWhenIsLogged: an idempotent layer given
// a when that no longer covers a refund of 40 runs that refund again when
// it is retried after the reload. The reload is applied (a narrowing is not
// told from a widening) and logged, naming the layer and the tools.
func TestReloadThatNarrowsIdempotentsWhenIsLogged(t *testing.T) {
	s, refunds, err := refundThenReload(t, false, func(src string) string {
		return strings.Replace(src, `use: "idempotent",`, `use: "idempotent", when: "args.amount > 100.0",`, 1)
	})
	require.NoError(t, err)
	logs := s.logs.String()
	assert.Contains(t, logs, "the policy change may narrow what a layer deduplicates")
	assert.Contains(t, logs, `when unset → \"args.amount > 100.0\"`)
	assert.NotContains(t, logs, "leaves shared state behind")
	refundOnce(t, s.url, "retry")
	assert.EqualValues(t, 2, refunds.Load(), "the refund of 40, no longer covered, ran again")
}

// TestReloadOfAToolChainNeverRunIsApplied: without mcp servers the gateway
// runs no tool (the client runs those the model proposes), so no
// idempotency record of it exists; a reload changing the idempotent
// layer's key_args was refused all the same, as if calls made before it
// could run again, while the start warned that the layer never acts. It is
// applied, without a word about the tool chain's state. Once a generation
// has served mcp servers, records may exist, and such a change is refused.
func TestReloadOfAToolChainNeverRunIsApplied(t *testing.T) {
	policy := func(mcpServers, keyArgs string) string {
		return fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
%s
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent", key_args: %s}]
`, sha("agent-key"), mcpServers, keyArgs)
	}
	upstream, _ := inProcessUpstream(t) // before the server, which it outlives
	dir := writePolicy(t, policy("", `["order_id"]`))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy("", `["order_id", "amount"]`)), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	assert.NotContains(t, s.logs.String(), "shared state")

	// Served once with mcp servers, the tool chain may hold records.
	servers := fmt.Sprintf(`mcp: servers: pay: url: %q`, upstream)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy(servers, `["order_id", "amount"]`)), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy("", `["order_id"]`)), 0o644))
	require.ErrorIs(t, s.srv.Reload(context.Background()), ErrStateReset)

	// A host's tools run through the tool chain too, mcp servers or not:
	// its state is compared, and its layers are not said never to act.
	dir = writePolicy(t, policy("", `["order_id"]`))
	s = startServer(t, Options{Source: cueSource(dir), WatchInterval: -1,
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
	assert.NotContains(t, s.logs.String(), "tool-chain layers that act only on a call that runs")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy("", `["order_id", "amount"]`)), 0o644))
	require.ErrorIs(t, s.srv.Reload(context.Background()), ErrStateReset)
}

// TestStateChangeLogNamesThePolicyDirectory: the layer a change leaves
// state behind of is named at its position with the policy's directory as
// the source names it (Loaded.PosDir), as the reload's diagnostics are.
func TestStateChangeLogNamesThePolicyDirectory(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	dir := writePolicy(t, keyArgsPolicy(upstream, `["order_id"]`))
	src := SourceFunc(func(ctx context.Context) (*Loaded, error) {
		ld, err := cueSource(dir).Load(ctx)
		if ld != nil {
			ld.PosDir = "pol"
		}
		return ld, err
	})
	s := startServer(t, Options{Source: src, WatchInterval: -1, AllowStateReset: true})
	refundOnce(t, s.url, "first")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(strings.Replace(keyArgsPolicy(upstream, `["order_id"]`), `key_args: ["order_id"]`, `key_args: ["order_id", "amount"]`, 1)), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	logs := s.logs.String()
	assert.Contains(t, logs, "the policy change leaves shared state behind")
	assert.Regexp(t, `pos=`+regexp.QuoteMeta(filepath.Join("pol", "policy.cue"))+`:\d+:\d+ `, logs)
}
