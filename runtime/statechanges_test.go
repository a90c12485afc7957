package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/memoize"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	_ "github.com/agentc-dev/agentc/builtins/semanticmemoize"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// resetPlan is a plan with a side-effecting tool refund, a read-only tool
// lookup, two shared stores and the given chains.
func resetPlan(chains plan.Chains) *plan.Plan {
	p := rt.Plan(chains)
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "payout": {SideEffecting: true}, "lookup": {}}
	p.Stores = map[string]plan.Store{
		"shared": {Kind: "redis", URLEnv: "REDIS_URL", Prefix: "billing"},
		"other":  {Kind: "redis", URLEnv: "OTHER_URL"},
	}
	return p
}

func toolChain(ls ...plan.Layer) plan.Chains { return plan.Chains{Tool: ls} }

// fields returns the fields of each change, with its tool.
func fields(cs []runtime.StateChange) [][]string {
	var out [][]string
	for _, c := range cs {
		out = append(out, append([]string{c.Tool}, c.Fields...))
	}
	return out
}

func TestStateChangesIdempotent(t *testing.T) {
	old := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))

	t.Run("key_args widened", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`)))
		cs := runtime.StateChanges(old, next)
		assert.Equal(t, [][]string{{"payout", "key_args"}, {"refund", "key_args"}}, fields(cs))
		require.Len(t, cs, 2)
		assert.True(t, cs[1].Repeats)
		assert.Equal(t, []string{`["order_id"]`}, cs[1].Was)
		assert.Equal(t, []string{`["order_id","amount"]`}, cs[1].Now)
		assert.Contains(t, cs[1].Message(), "calls of refund made before the change run again if repeated")
		assert.Contains(t, cs[1].Message(), `in store "shared" (redis, url_env REDIS_URL, prefix billing)`)
	})
	t.Run("key_args dropped", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared"}`)))
		assert.Equal(t, [][]string{{"payout", "key_args"}, {"refund", "key_args"}}, fields(runtime.StateChanges(old, next)))
	})
	t.Run("ttl, lease, name and place keep the records", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("log", ""),
			rt.Named("once", rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"],"ttl":"1h","lease_ttl":"5s"}`))))
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("scoped to one tool", func(t *testing.T) {
		l := rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`)
		l.Tools = []string{"refund"}
		assert.Equal(t, [][]string{{"refund", "key_args"}}, fields(runtime.StateChanges(old, resetPlan(toolChain(l)))))
	})
	t.Run("another store", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"other","key_args":["order_id"]}`)))
		assert.Equal(t, [][]string{{"payout", "store"}, {"refund", "store"}}, fields(runtime.StateChanges(old, next)))
	})
	t.Run("the store renamed keeps the records", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"billing","key_args":["order_id"]}`)))
		next.Stores["billing"] = next.Stores["shared"]
		delete(next.Stores, "shared")
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("the store's prefix changed", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))
		next.Stores["shared"] = plan.Store{Kind: "redis", URLEnv: "REDIS_URL", Prefix: "billing2"}
		cs := runtime.StateChanges(old, next)
		assert.Equal(t, [][]string{{"payout", "stores.shared"}, {"refund", "stores.shared"}}, fields(cs))
	})
	t.Run("removed or a tool no longer side-effecting", func(t *testing.T) {
		assert.Empty(t, runtime.StateChanges(old, resetPlan(toolChain())))
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`)))
		next.Tools = map[string]plan.Tool{"refund": {}, "payout": {}}
		assert.Empty(t, runtime.StateChanges(old, next))
	})
}

func TestStateChangesMeter(t *testing.T) {
	old := resetPlan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"store":"shared","scope":"key","budget":{"usd":50}}`)}})
	for name, tc := range map[string]struct {
		layer plan.Layer
		want  [][]string
	}{
		"budget raised":   {rt.Layer("meter", `{"store":"shared","scope":"key","budget":{"usd":80},"on_cross":"refuse"}`), nil},
		"renamed":         {rt.Named("spend", rt.Layer("meter", `{"store":"shared","scope":"key","budget":{"usd":50}}`)), [][]string{{"", "name"}}},
		"scope changed":   {rt.Layer("meter", `{"store":"shared","scope":"global","budget":{"usd":50}}`), [][]string{{"", "scope"}}},
		"in the process":  {rt.Layer("meter", `{"scope":"key","budget":{"usd":50}}`), [][]string{{"", "store"}}},
		"renamed, scoped": {rt.Named("spend", rt.Layer("meter", `{"store":"shared","scope":"run"}`)), [][]string{{"", "name", "scope"}}},
	} {
		t.Run(name, func(t *testing.T) {
			cs := runtime.StateChanges(old, resetPlan(plan.Chains{Chat: []plan.Layer{tc.layer}}))
			assert.Equal(t, tc.want, fields(cs))
			for _, c := range cs {
				assert.False(t, c.Repeats)
				assert.Contains(t, c.Message(), "what was spent before the change no longer counts against the budget")
			}
		})
	}
}

func TestStateChangesRateLimit(t *testing.T) {
	old := resetPlan(plan.Chains{Turn: []plan.Layer{rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`)}})
	for name, tc := range map[string]struct {
		layer plan.Layer
		want  [][]string
	}{
		"rate, burst and mode":  {rt.Layer("rate_limit", `{"store":"shared","rate":60,"per":"1m","burst":5,"mode":"reject","scope":"key"}`), nil},
		"scope":                 {rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"run"}`), [][]string{{"", "scope"}}},
		"a shared limiter":      {rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key","limiter":"all"}`), [][]string{{"", "limiter"}}},
		"renamed, own bucket":   {rt.Named("turns", rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`)), [][]string{{"", "name"}}},
		"renamed, same limiter": {rt.Named("turns", rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key","limiter":"all"}`)), [][]string{{"", "limiter"}}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, fields(runtime.StateChanges(old, resetPlan(plan.Chains{Turn: []plan.Layer{tc.layer}}))))
		})
	}
}

func TestStateChangesCaches(t *testing.T) {
	old := resetPlan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("memoize", `{"store":"shared","scope":"key","ttl":"10m"}`),
		rt.Layer("semantic_memoize", `{"scope":"key","threshold":0.9,"ttl":"10m"}`),
	}})
	next := resetPlan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("memoize", `{"store":"shared","scope":"key","ttl":"1h","single_flight":true}`),
		rt.Layer("semantic_memoize", `{"scope":"global","threshold":0.8,"ttl":"10m"}`),
	}})
	cs := runtime.StateChanges(old, next)
	assert.Equal(t, [][]string{{"", "single_flight"}, {"", "scope"}}, fields(cs))
	for _, c := range cs {
		assert.False(t, c.Repeats)
	}
}

// TestStateKeysAreTheRuntimes runs a call through layers as the runtime
// builds them and finds its state under the keys StateKeys gives: the keys
// compared are the ones the layers use.
func TestStateKeysAreTheRuntimes(t *testing.T) {
	ctx := runtime.WithRun(context.Background(), runtime.SampleRun)
	mem := runtime.NewMemoryStore()
	p := resetPlan(toolChain(
		rt.Layer("meter", `{"scope":"key"}`),
		rt.Layer("rate_limit", `{"rate":1,"per":"1h","scope":"run"}`),
		rt.Layer("idempotent", `{"key_args":["order_id"]}`),
	))
	p.Stores = nil
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := rt.Build(t, p, runtime.Deps{Memory: mem, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "sample-order_id"}})
	require.NoError(t, err)

	keys := map[string]runtime.StateKey{}
	for _, l := range p.Chains.Tool {
		ks := runtime.LayerStateKeys(runtime.StateSite{Plan: p, Stage: plan.StageTool, Layer: l})
		require.NotEmpty(t, ks, l.Use)
		keys[l.Use] = ks[len(ks)-1] // idempotent: payout's, then refund's
	}
	led, err := mem.LedgerOf(ctx, keys["meter"].Key)
	require.NoError(t, err)
	assert.EqualValues(t, 1, led.Calls, "the meter charged the key StateKeys gives")
	_, ok, err := mem.Allow(ctx, keys["rate_limit"].Key, time.Hour, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the call took the bucket StateKeys gives")
	_, found, err := mem.Get(ctx, keys["idempotent"].Key)
	require.NoError(t, err)
	assert.True(t, found, "the call's record is under the key StateKeys gives")
	assert.Equal(t, "refund", keys["idempotent"].Tool)
}
