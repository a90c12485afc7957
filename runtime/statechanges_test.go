package runtime_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/checkpoint"
	_ "github.com/agentc-dev/agentc/builtins/guard"
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
		// payout is no longer deduped at all: its records are left behind.
		assert.Equal(t, [][]string{{"payout", "tools"}, {"refund", "key_args"}}, fields(runtime.StateChanges(old, resetPlan(toolChain(l)))))
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
	t.Run("a tool no longer side-effecting", func(t *testing.T) {
		next := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`)))
		next.Tools = map[string]plan.Tool{"refund": {}, "payout": {}}
		assert.Empty(t, runtime.StateChanges(old, next))
	})
}

// TestStateChangesRemoved: an idempotent layer removed, or no longer
// covering a side-effecting tool, leaves its records behind: a call
// repeated after the change runs again.
func TestStateChangesRemoved(t *testing.T) {
	old := resetPlan(toolChain(rt.Layer("log", ""), rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))

	t.Run("the layer removed", func(t *testing.T) {
		cs := runtime.StateChanges(old, resetPlan(toolChain(rt.Layer("log", ""))))
		assert.Equal(t, [][]string{{"payout"}, {"refund"}}, fields(cs))
		require.Len(t, cs, 2)
		c := cs[1]
		assert.True(t, c.Repeats)
		assert.True(t, c.Removed)
		assert.Equal(t, "idempotent", c.Layer)
		assert.Equal(t, old.Chains.Tool[1].Pos, c.Pos)
		assert.Equal(t, "idempotent of the baseline is removed: its idempotency records of refund, kept in store \"shared\" (redis, url_env REDIS_URL, prefix billing), are left behind: calls of refund made before the change run again if repeated", c.Message())
	})
	t.Run("scoped to fewer tools", func(t *testing.T) {
		l := rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)
		l.Tools = []string{"refund"}
		cs := runtime.StateChanges(old, resetPlan(toolChain(l)))
		assert.Equal(t, [][]string{{"payout", "tools"}}, fields(cs))
		require.Len(t, cs, 1)
		assert.True(t, cs[0].Repeats)
		assert.Equal(t, []string{"unset"}, cs[0].Was)
		assert.Equal(t, []string{`["refund"]`}, cs[0].Now)
		assert.Contains(t, cs[0].Message(), "idempotent no longer covers payout (tools unset → [\"refund\"])")
	})
	t.Run("another layer keeps the same records", func(t *testing.T) {
		next := resetPlan(toolChain(
			rt.Named("refunds", rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)),
			rt.Named("payouts", rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`))))
		next.Chains.Tool[0].Tools, next.Chains.Tool[1].Tools = []string{"refund"}, []string{"payout"}
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("the tool no longer side-effecting or gone", func(t *testing.T) {
		next := resetPlan(toolChain())
		next.Tools = map[string]plan.Tool{"refund": {}}
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("a meter, a rate limit or a cache removed", func(t *testing.T) {
		old := resetPlan(plan.Chains{Chat: []plan.Layer{
			rt.Layer("meter", `{"store":"shared","scope":"key"}`),
			rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m"}`),
			rt.Layer("memoize", `{"store":"shared"}`),
		}})
		assert.Empty(t, runtime.StateChanges(old, resetPlan(plan.Chains{})))
	})
	t.Run("a declared tool renamed", func(t *testing.T) {
		// A call of the old name is refused as an unknown tool after the
		// change: it does not run again.
		next := resetPlan(old.Chains)
		next.Tools = map[string]plan.Tool{"refund_order": {SideEffecting: true}, "payout": {SideEffecting: true}}
		assert.Empty(t, runtime.StateChanges(old, next))
	})
}

// mcpPlan is resetPlan with an MCP server fs (prefix fs_) whose tools an
// unscoped idempotent layer covers.
func mcpPlan(servers map[string]plan.MCPServer) *plan.Plan {
	p := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared"}`)))
	p.MCPServers = servers
	return p
}

func TestStateChangesMCPPrefix(t *testing.T) {
	old := mcpPlan(map[string]plan.MCPServer{"fs": {Command: []string{"fs-server"}, Prefix: "fs_"}})
	t.Run("prefix changed", func(t *testing.T) {
		next := mcpPlan(map[string]plan.MCPServer{"fs": {Command: []string{"fs-server"}, Prefix: "files_"}})
		cs := runtime.StateChanges(old, next)
		require.Len(t, cs, 1)
		c := cs[0]
		assert.Equal(t, `the tools of mcp server "fs"`, c.Tool)
		assert.Equal(t, "fs", c.Server)
		assert.Equal(t, []string{"mcp_servers.fs.prefix"}, c.Fields)
		assert.Equal(t, []string{`"fs_"`}, c.Was)
		assert.Equal(t, []string{`"files_"`}, c.Now)
		assert.True(t, c.Repeats)
	})
	t.Run("renamed with another prefix", func(t *testing.T) {
		next := mcpPlan(map[string]plan.MCPServer{"files": {Command: []string{"fs-server"}, Prefix: "files_"}})
		cs := runtime.StateChanges(old, next)
		require.Len(t, cs, 1)
		assert.Equal(t, []string{"mcp_servers.files.prefix"}, cs[0].Fields)
	})
	t.Run("renamed, its prefix kept", func(t *testing.T) {
		next := mcpPlan(map[string]plan.MCPServer{"files": {Command: []string{"fs-server"}, Prefix: "fs_"}})
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("its command changed, name and prefix kept", func(t *testing.T) {
		next := mcpPlan(map[string]plan.MCPServer{"fs": {Command: []string{"fs-server", "-v"}, Prefix: "fs_"}})
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("removed", func(t *testing.T) {
		assert.Empty(t, runtime.StateChanges(old, mcpPlan(nil)))
	})
	t.Run("the layer removed", func(t *testing.T) {
		next := mcpPlan(old.MCPServers)
		next.Chains.Tool = nil
		cs := runtime.StateChanges(old, next)
		assert.Equal(t, [][]string{{`the tools of mcp server "fs"`}, {"payout"}, {"refund"}}, fields(cs))
	})
	t.Run("scoped to a tool of it", func(t *testing.T) {
		scoped := func(prefix string) *plan.Plan {
			p := mcpPlan(map[string]plan.MCPServer{"fs": {URL: "http://127.0.0.1:9/mcp", Prefix: prefix}})
			p.Chains.Tool[0].Tools = []string{prefix + "write"}
			return p
		}
		cs := runtime.StateChanges(scoped("fs_"), scoped("files_"))
		require.Len(t, cs, 1)
		assert.Equal(t, "files_write", cs[0].Tool)
		assert.Equal(t, []string{"tools", "mcp_servers.fs.prefix"}, cs[0].Fields)
	})
}

// TestStateChangesCheckpoint: a checkpoint layer pointed at another store
// leaves the runs saved before behind: they cannot be resumed.
func TestStateChangesCheckpoint(t *testing.T) {
	old := resetPlan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"store":"shared","keep":10}`)}})
	next := resetPlan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"store":"other","keep":10}`)}})
	cs := runtime.StateChanges(old, next)
	assert.Equal(t, [][]string{{"", "store"}}, fields(cs))
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Repeats)
	assert.Contains(t, cs[0].Message(), "runs saved before the change are not found, so they cannot be resumed")

	kept := resetPlan(plan.Chains{Turn: []plan.Layer{rt.Named("saves", rt.Layer("checkpoint", `{"store":"shared","keep":0,"after_tool":true}`))}})
	assert.Empty(t, runtime.StateChanges(old, kept))
	assert.Empty(t, runtime.StateChanges(old, resetPlan(plan.Chains{})), "a run saved before can still be resumed by a host")
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
		"windowed":        {rt.Layer("meter", `{"store":"shared","scope":"key","budget":{"usd":50},"window":"24h"}`), [][]string{{"", "window"}}},
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

// Two meters of one chain are two ledgers: a change to one's window
// starts that one afresh and leaves the other's spend standing.
func TestStateChangesTwoMeters(t *testing.T) {
	daily := func(window string) plan.Layer {
		return rt.Named("tenant_daily", rt.Layer("meter", `{"store":"shared","scope":"key","window":"`+window+`","budget":{"usd":20}}`))
	}
	perRun := rt.Named("per_run", rt.Layer("meter", `{"store":"shared","scope":"run","budget":{"usd":2}}`))
	old := resetPlan(plan.Chains{Chat: []plan.Layer{daily("24h"), perRun}})
	assert.Empty(t, runtime.StateChanges(old, resetPlan(plan.Chains{Chat: []plan.Layer{daily("86400s"), perRun}})),
		"the same window written another way")
	cs := runtime.StateChanges(old, resetPlan(plan.Chains{Chat: []plan.Layer{daily("month"), perRun}}))
	require.Len(t, cs, 1)
	assert.Equal(t, "tenant_daily", cs[0].Layer)
	assert.Equal(t, [][]string{{"", "window"}}, fields(cs))
	assert.Contains(t, cs[0].Message(), `window "24h" → "month"`)
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

// TestStateChangesEveryField changes each config field of every layer that
// keeps state, one at a time, and asserts a change is reported exactly for
// the fields the layer's keys (or its store's identity) are made of. The
// table must name every field the layer decodes, so that a field added to
// a layer is decided on here.
func TestStateChangesEveryField(t *testing.T) {
	type mutation struct {
		value json.RawMessage // the field's new value (JSON)
		keyed bool            // the layer's keys read it
	}
	for _, tc := range []struct {
		stage  plan.Stage
		use    string
		config string
		fields map[string]mutation
	}{
		{plan.StageTool, "idempotent", `{"store":"shared","ttl":"24h","key_args":["order_id"]}`, map[string]mutation{
			"ttl":       {value: json.RawMessage(`"1h"`)},
			"lease_ttl": {value: json.RawMessage(`"5s"`)},
			"store":     {value: json.RawMessage(`"other"`), keyed: true},
			"key_args":  {value: json.RawMessage(`["order_id","amount"]`), keyed: true},
			"vary_args": {value: json.RawMessage(`["note"]`)},
			"name":      {value: json.RawMessage(`"once"`)},
			"tools":     {value: json.RawMessage(`["refund"]`), keyed: true},
			// plain_lookup says whether records written before the
			// digest key are looked for, not where a call's own are.
			"plain_lookup": {value: json.RawMessage(`false`)},
		}},
		{plan.StageChat, "meter", `{"store":"shared","scope":"key","budget":{"usd":5}}`, map[string]mutation{
			"budget":   {value: json.RawMessage(`{"usd":50}`)},
			"on_error": {value: json.RawMessage(`"open"`)},
			"on_cross": {value: json.RawMessage(`"refuse"`)},
			"lease":    {value: json.RawMessage(`"1m"`)},
			"scope":    {value: json.RawMessage(`"global"`), keyed: true},
			"store":    {value: json.RawMessage(`"other"`), keyed: true},
			"name":     {value: json.RawMessage(`"spend"`), keyed: true},
			"window":   {value: json.RawMessage(`"24h"`), keyed: true},
		}},
		{plan.StageTurn, "rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`, map[string]mutation{
			"rate":    {value: json.RawMessage(`60`)},
			"per":     {value: json.RawMessage(`"1h"`)},
			"burst":   {value: json.RawMessage(`3`)},
			"mode":    {value: json.RawMessage(`"reject"`)},
			"scope":   {value: json.RawMessage(`"run"`), keyed: true},
			"store":   {value: json.RawMessage(`"other"`), keyed: true},
			"limiter": {value: json.RawMessage(`"all"`), keyed: true},
			"name":    {value: json.RawMessage(`"turns"`), keyed: true},
		}},
		{plan.StageChat, "memoize", `{"store":"shared","scope":"key","ttl":"10m"}`, map[string]mutation{
			"ttl":           {value: json.RawMessage(`"1h"`)},
			"lease_ttl":     {value: json.RawMessage(`"5s"`)},
			"scope":         {value: json.RawMessage(`"global"`), keyed: true},
			"store":         {value: json.RawMessage(`"other"`), keyed: true},
			"single_flight": {value: json.RawMessage(`true`), keyed: true},
			"name":          {value: json.RawMessage(`"cache"`), keyed: true},
		}},
		{plan.StageChat, "semantic_memoize", `{"index":"shared","scope":"key","threshold":0.9,"ttl":"10m"}`, map[string]mutation{
			"threshold": {value: json.RawMessage(`0.8`)},
			"ttl":       {value: json.RawMessage(`"1h"`)},
			"scope":     {value: json.RawMessage(`"run"`), keyed: true},
			"index":     {value: json.RawMessage(`"other"`), keyed: true},
			"name":      {value: json.RawMessage(`"near"`), keyed: true},
		}},
		{plan.StageTurn, "checkpoint", `{"store":"shared","keep":10}`, map[string]mutation{
			"keep":       {value: json.RawMessage(`0`)},
			"after_tool": {value: json.RawMessage(`true`)},
			"store":      {value: json.RawMessage(`"other"`), keyed: true},
			"name":       {value: json.RawMessage(`"saves"`)},
		}},
		{plan.StageTool, "guard", `{"deny":"tool.name == 'refund'","message":"no refunds"}`, map[string]mutation{
			"message":  {value: json.RawMessage(`"refunds are closed"`)},
			"require":  {value: json.RawMessage(`"tool.name != 'refund'"`)},
			"deny":     {value: json.RawMessage(`"tool.name == 'payout'"`)},
			"phase":    {value: json.RawMessage(`"after"`)},
			"on_error": {value: json.RawMessage(`"open"`)},
			"name":     {value: json.RawMessage(`"no_refunds"`)},
		}},
	} {
		m, ok := runtime.LookupModule(tc.use)
		require.True(t, ok, tc.use)
		for _, f := range configFieldNames(m.New()) {
			assert.Contains(t, tc.fields, f, "%s decodes field %s: decide here whether its keys read it", tc.use, f)
		}
		layer := func(field string, v json.RawMessage) plan.Layer {
			l := rt.Layer(tc.use, tc.config)
			switch field {
			case "name":
				require.NoError(t, json.Unmarshal(v, &l.Name))
			case "tools":
				require.NoError(t, json.Unmarshal(v, &l.Tools))
			default:
				cfg := map[string]json.RawMessage{}
				require.NoError(t, json.Unmarshal(l.Config, &cfg))
				cfg[field] = v
				l.Config, _ = json.Marshal(cfg)
			}
			return l
		}
		chain := func(l plan.Layer) *plan.Plan {
			var c plan.Chains
			switch tc.stage {
			case plan.StageChat:
				c.Chat = []plan.Layer{l}
			case plan.StageTool:
				c.Tool = []plan.Layer{l}
			default:
				c.Turn = []plan.Layer{l}
			}
			return resetPlan(c)
		}
		old := chain(rt.Layer(tc.use, tc.config))
		for field, mu := range tc.fields {
			t.Run(tc.use+"/"+field, func(t *testing.T) {
				cs := runtime.StateChanges(old, chain(layer(field, mu.value)))
				if !mu.keyed {
					assert.Empty(t, cs)
					return
				}
				require.NotEmpty(t, cs)
				for _, c := range cs {
					assert.Equal(t, field, c.Fields[0])
				}
			})
		}
		if tc.use == "guard" {
			continue
		}
		// The declaration of the store the layer names: where it is, not
		// how long an operation may take.
		for field, change := range map[string]struct {
			set   func(*plan.Store)
			keyed bool
		}{
			"kind":    {func(s *plan.Store) { s.Kind = "postgres" }, true},
			"url":     {func(s *plan.Store) { s.URL = "redis://127.0.0.1:6379/1" }, true},
			"url_env": {func(s *plan.Store) { s.URLEnv = "REDIS2_URL" }, true},
			"prefix":  {func(s *plan.Store) { s.Prefix = "billing2" }, true},
			"path":    {func(s *plan.Store) { s.Path = "state.db" }, true},
			"timeout": {func(s *plan.Store) { s.Timeout = "9s" }, false},
		} {
			t.Run(tc.use+"/stores.shared."+field, func(t *testing.T) {
				next := chain(rt.Layer(tc.use, tc.config))
				s := next.Stores["shared"]
				change.set(&s)
				next.Stores["shared"] = s
				cs := runtime.StateChanges(old, next)
				if !change.keyed {
					assert.Empty(t, cs)
					return
				}
				require.NotEmpty(t, cs)
				assert.Equal(t, []string{"stores.shared"}, cs[0].Fields)
			})
		}
	}
}

// configFieldNames returns the JSON names of mw's config fields (its
// exported fields).
func configFieldNames(mw any) []string {
	var out []string
	v := reflect.TypeOf(mw).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestStateKeysOfMCPTools: the key of an MCP server's sample call is the
// key of a call of the tool the chain sees under the server's prefix, as
// for any tool of that name.
func TestStateKeysOfMCPTools(t *testing.T) {
	l := rt.Layer("idempotent", `{"key_args":["order_id"]}`)
	viaServer := resetPlan(toolChain(l))
	viaServer.Tools = nil
	viaServer.MCPServers = map[string]plan.MCPServer{"fs": {Command: []string{"fs-server"}, Prefix: "fs_"}}
	declared := resetPlan(toolChain(l))
	declared.Tools = map[string]plan.Tool{"fs_" + runtime.SampleMCPTool: {SideEffecting: true}}

	ks := runtime.LayerStateKeys(runtime.StateSite{Plan: viaServer, Stage: plan.StageTool, Layer: l})
	require.Len(t, ks, 1)
	assert.Equal(t, "fs", ks[0].Server)
	want := runtime.LayerStateKeys(runtime.StateSite{Plan: declared, Stage: plan.StageTool, Layer: l})
	require.Len(t, want, 1)
	assert.Equal(t, want[0].Key, ks[0].Key)
}

// sharedMeter returns a meter of scope in the shared store.
func sharedMeter(scope string) plan.Layer {
	return rt.Layer("meter", `{"store":"shared","scope":"`+scope+`","budget":{"usd":50}}`)
}

// noTenant describes a policy without keys in a StateChange.
const noTenant = "unset, calls without a tenant"

// withKeys returns p with the virtual keys keys.
func withKeys(p *plan.Plan, keys map[string]plan.Key) *plan.Plan {
	p.Keys = keys
	return p
}

// TestStateChangesTenant: the tenant of a virtual key is part of the keys of
// every layer keyed by the tenant (idempotent, meter and rate_limit with
// scope "key", memoize with scope "key"); a key given another tenant, or a
// key renamed whose tenant is its name, leaves its calls' state behind,
// reported at the key's tenant for those layers only.
func TestStateChangesTenant(t *testing.T) {
	chains := func() plan.Chains {
		return plan.Chains{
			Chat: []plan.Layer{
				rt.Layer("meter", `{"store":"shared","scope":"key","budget":{"usd":50}}`),
				rt.Named("total", rt.Layer("meter", `{"store":"shared","scope":"global","budget":{"usd":500}}`)),
				rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`),
			},
			Tool: []plan.Layer{rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)},
		}
	}
	old := withKeys(resetPlan(chains()), map[string]plan.Key{
		"agent": {SHA256: "aa", Tenant: "shop"},
		"ops":   {Env: "OPS_KEY", Tenant: "ops"},
	})
	tenantFields := func(cs []runtime.StateChange) [][]string {
		var out [][]string
		for _, c := range cs {
			out = append(out, append([]string{c.Layer, c.Tool, c.Key}, append(c.Fields, c.Was[0], c.Now[0])...))
		}
		return out
	}

	t.Run("key moved to another tenant", func(t *testing.T) {
		next := withKeys(resetPlan(chains()), map[string]plan.Key{
			"agent": {SHA256: "aa", Tenant: "store"},
			"ops":   {Env: "OPS_KEY", Tenant: "ops"},
		})
		cs := runtime.StateChanges(old, next)
		assert.Equal(t, [][]string{
			{"meter", "", "agent", "keys.agent.tenant", `"shop"`, `"store"`},
			{"rate_limit", "", "agent", "keys.agent.tenant", `"shop"`, `"store"`},
			{"idempotent", "payout", "agent", "keys.agent.tenant", `"shop"`, `"store"`},
			{"idempotent", "refund", "agent", "keys.agent.tenant", `"shop"`, `"store"`},
		}, tenantFields(cs))
		require.Len(t, cs, 4)
		assert.False(t, cs[0].Repeats)
		assert.True(t, cs[3].Repeats)
		assert.Equal(t, `idempotent keys the calls of key "agent" differently from the baseline (keys.agent.tenant "shop" → "store"): `+
			`its idempotency records of refund, kept in store "shared" (redis, url_env REDIS_URL, prefix billing), start afresh for them: `+
			`calls of refund made before the change run again if repeated`, cs[3].Message())
	})
	t.Run("key renamed, its tenant its name", func(t *testing.T) {
		o := withKeys(resetPlan(chains()), map[string]plan.Key{"agent": {SHA256: "aa"}})
		n := withKeys(resetPlan(chains()), map[string]plan.Key{"bot": {SHA256: "aa"}})
		cs := runtime.StateChanges(o, n)
		require.Len(t, cs, 4)
		assert.Equal(t, []string{"idempotent", "refund", "bot", "keys.bot.tenant", `"agent"`, `"bot"`}, tenantFields(cs)[3])
	})
	t.Run("key renamed keeping its tenant, tenant renamed on no key, key added or removed", func(t *testing.T) {
		next := withKeys(resetPlan(chains()), map[string]plan.Key{
			"shop_agent": {SHA256: "aa", Tenant: "shop"},
			"audit":      {SHA256: "bb", Tenant: "audit"},
		})
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("a key with a new secret is another caller", func(t *testing.T) {
		next := withKeys(resetPlan(chains()), map[string]plan.Key{"bot": {SHA256: "cc"}, "ops": {Env: "OPS_KEY", Tenant: "ops"}})
		assert.Empty(t, runtime.StateChanges(old, next))
	})
	t.Run("a run's state, its id named by its tenant", func(t *testing.T) {
		o := withKeys(resetPlan(plan.Chains{Chat: []plan.Layer{sharedMeter("run"), rt.Named("total", sharedMeter("global"))}}), map[string]plan.Key{"agent": {SHA256: "aa", Tenant: "shop"}})
		n := withKeys(resetPlan(plan.Chains{Chat: []plan.Layer{sharedMeter("run"), rt.Named("total", sharedMeter("global"))}}), map[string]plan.Key{"agent": {SHA256: "aa", Tenant: "store"}})
		assert.Equal(t, [][]string{{"meter", "", "agent", "keys.agent.tenant", `"shop"`, `"store"`}}, tenantFields(runtime.StateChanges(o, n)))
	})
	t.Run("keys declared where there were none, and none where there were some", func(t *testing.T) {
		none := resetPlan(chains())
		cs := runtime.StateChanges(none, old)
		assert.Equal(t, [][]string{
			{"meter", "", "", "keys", noTenant, `set, calls under their key's tenant ("ops", "shop")`},
			{"rate_limit", "", "", "keys", noTenant, `set, calls under their key's tenant ("ops", "shop")`},
			{"idempotent", "payout", "", "keys", noTenant, `set, calls under their key's tenant ("ops", "shop")`},
			{"idempotent", "refund", "", "keys", noTenant, `set, calls under their key's tenant ("ops", "shop")`},
		}, tenantFields(cs))
		require.Len(t, cs, 4)
		assert.True(t, cs[3].Repeats)
		assert.Equal(t, `idempotent keys its state differently from the baseline (keys unset, calls without a tenant → set, calls under their key's tenant ("ops", "shop")): `+
			`its idempotency records of refund, kept in store "shared" (redis, url_env REDIS_URL, prefix billing), start afresh: `+
			`calls of refund made before the change run again if repeated`, cs[3].Message())
		back := runtime.StateChanges(old, none)
		require.Len(t, back, 4)
		assert.Equal(t, []string{"idempotent", "refund", "", "keys", `set, calls under their key's tenant ("ops", "shop")`, noTenant}, tenantFields(back)[3])
	})
	t.Run("a layer keyed differently anyway is reported once", func(t *testing.T) {
		c := chains()
		c.Tool = []plan.Layer{rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`)}
		next := withKeys(resetPlan(c), map[string]plan.Key{
			"agent": {SHA256: "aa", Tenant: "store"},
			"ops":   {Env: "OPS_KEY", Tenant: "ops"},
		})
		assert.Equal(t, [][]string{{"", "keys.agent.tenant"}, {"", "keys.agent.tenant"}, {"payout", "key_args"}, {"refund", "key_args"}},
			fields(runtime.StateChanges(old, next)))
	})
}

// TestStateChangesPairing: a layer is paired by kind and name, else as the
// only one of its kind, else with the layer of its kind and name another
// chain adds. Naming a layer whose keys do not hold its name reports
// nothing; naming one whose keys do, or moving a meter to another chain,
// reports the reset; a shared limiter moved keeps its buckets.
func TestStateChangesPairing(t *testing.T) {
	meter := sharedMeter
	for name, tc := range map[string]struct {
		old, next plan.Chains
		want      [][]string
	}{
		"idempotent named": {
			toolChain(rt.Layer("idempotent", `{"store":"shared"}`)),
			toolChain(rt.Named("once", rt.Layer("idempotent", `{"store":"shared"}`))),
			nil,
		},
		"one of two meters named": {
			plan.Chains{Chat: []plan.Layer{meter("key"), rt.Named("total", meter("global"))}},
			plan.Chains{Chat: []plan.Layer{rt.Named("total", meter("global")), rt.Named("per_key", meter("key"))}},
			[][]string{{"", "name"}},
		},
		"two meters renamed, each paired with the one most like it": {
			plan.Chains{Chat: []plan.Layer{rt.Named("daily", meter("key")), rt.Named("per_run", meter("run"))}},
			plan.Chains{Chat: []plan.Layer{rt.Named("run_budget", meter("run")), rt.Named("tenant_daily", meter("key"))}},
			[][]string{{"", "name"}, {"", "name"}},
		},
		"two rate limits renamed": {
			plan.Chains{Chat: []plan.Layer{
				rt.Named("fast", rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`)),
				rt.Named("slow", rt.Layer("rate_limit", `{"store":"shared","rate":60,"per":"1h","scope":"key"}`))}},
			plan.Chains{Chat: []plan.Layer{
				rt.Named("minute", rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`)),
				rt.Named("hour", rt.Layer("rate_limit", `{"store":"shared","rate":60,"per":"1h","scope":"key"}`))}},
			[][]string{{"", "name"}, {"", "name"}},
		},
		"two meters, one removed and two added, are not paired": {
			plan.Chains{Chat: []plan.Layer{rt.Named("daily", meter("key"))}},
			plan.Chains{Chat: []plan.Layer{rt.Named("run_budget", meter("run")), rt.Named("tenant_daily", meter("key"))}},
			nil,
		},
		"a meter moved to the tool chain": {
			plan.Chains{Chat: []plan.Layer{meter("key")}},
			plan.Chains{Tool: []plan.Layer{meter("key")}},
			[][]string{{"", "chain"}},
		},
		"a meter moved and renamed is another meter": {
			plan.Chains{Chat: []plan.Layer{meter("key")}},
			plan.Chains{Tool: []plan.Layer{rt.Named("spend", meter("key"))}},
			nil,
		},
		"a shared limiter moved": {
			plan.Chains{Chat: []plan.Layer{rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key","limiter":"all"}`)}},
			plan.Chains{Turn: []plan.Layer{rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key","limiter":"all"}`)}},
			nil,
		},
		"a rate limit moved": {
			plan.Chains{Chat: []plan.Layer{rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"key"}`)}},
			plan.Chains{Turn: []plan.Layer{rt.Layer("rate_limit", `{"store":"shared","rate":6,"per":"1m","scope":"run"}`)}},
			[][]string{{"", "scope", "chain"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := runtime.StateChanges(resetPlan(tc.old), resetPlan(tc.next))
			assert.Equal(t, tc.want, fields(cs))
			for _, c := range cs {
				if slices.Contains(c.Fields, "name") {
					assert.Contains(t, [][2]string{{`"daily"`, `"tenant_daily"`}, {`"per_run"`, `"run_budget"`}, {`"fast"`, `"minute"`}, {`"slow"`, `"hour"`}, {`"meter"`, `"per_key"`}},
						[2]string{c.Was[0], c.Now[0]}, "paired with the layer most like it")
				}
				if slices.Contains(c.Fields, "chain") {
					assert.Contains(t, c.Message(), `chain "chat" → "`)
					assert.Equal(t, tc.next.Tool == nil, c.Stage == plan.StageTurn)
				}
			}
		})
	}
}

// TestCoverageChanges: an idempotent layer given a when, or another when,
// may no longer deduplicate calls its baseline did; a when removed, or
// kept, and a when on a layer that keeps no records of calls that ran,
// are not reported. No stored state is lost: StateChanges says nothing.
func TestCoverageChanges(t *testing.T) {
	when := func(src string, l plan.Layer) plan.Layer {
		if src != "" {
			l.When = &plan.Predicate{Stage: plan.StageTool, Source: src}
		}
		return l
	}
	dedup := func(src string) plan.Layer {
		return when(src, rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`))
	}
	for name, tc := range map[string]struct {
		was, now string
		layer    func(string) plan.Layer
		want     []string
	}{
		"when set":     {"", "args.amount > 100.0", dedup, []string{"unset", `"args.amount > 100.0"`}},
		"when changed": {"args.amount > 0.0", "args.amount > 100.0", dedup, []string{`"args.amount > 0.0"`, `"args.amount > 100.0"`}},
		"when removed": {"args.amount > 0.0", "", dedup, nil},
		"when kept":    {"args.amount > 0.0", "args.amount > 0.0", dedup, nil},
		"a meter's":    {"", "args.amount > 100.0", func(src string) plan.Layer { return when(src, sharedMeter("key")) }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			old, next := resetPlan(toolChain(tc.layer(tc.was))), resetPlan(toolChain(tc.layer(tc.now)))
			assert.Empty(t, runtime.StateChanges(old, next))
			cs := runtime.CoverageChanges(old, next)
			if tc.want == nil {
				assert.Empty(t, cs)
				return
			}
			require.Len(t, cs, 1)
			assert.Equal(t, []string{"payout", "refund"}, cs[0].Tools)
			assert.Contains(t, cs[0].Message(), "(when "+strings.Join(tc.want, " → ")+")")
			assert.Contains(t, cs[0].Message(), "is no longer deduplicated: one made before the change runs again if repeated")
		})
	}
}

// TestStateChangesRenamedIdempotent: two idempotent layers renamed, each
// with its key_args changed, are paired with the ones they were (not
// reported as removed), and name the baseline's layer, whose name their
// keys do not hold.
func TestStateChangesRenamedIdempotent(t *testing.T) {
	old := resetPlan(toolChain(
		rt.Named("refunds", scoped(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`), "refund")),
		rt.Named("payouts", scoped(rt.Layer("idempotent", `{"store":"shared","key_args":["payee"]}`), "payout"))))
	next := resetPlan(toolChain(
		rt.Named("once_payout", scoped(rt.Layer("idempotent", `{"store":"shared","key_args":["payee","amount"]}`), "payout")),
		rt.Named("once_refund", scoped(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`), "refund"))))
	cs := runtime.StateChanges(old, next)
	require.Len(t, cs, 2)
	assert.Equal(t, [][]string{{"payout", "key_args"}, {"refund", "key_args"}}, fields(cs))
	assert.False(t, cs[1].Removed)
	assert.Equal(t, `once_refund (idempotent, "refunds" in the baseline) keys its state differently from the baseline (key_args ["order_id"] → ["order_id","amount"]): `+
		`its idempotency records of refund, kept in store "shared" (redis, url_env REDIS_URL, prefix billing), start afresh: `+
		`calls of refund made before the change run again if repeated`, cs[1].Message())

	unnamed := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))
	named := resetPlan(toolChain(rt.Named("once", rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`))))
	cs = runtime.StateChanges(unnamed, named)
	require.Len(t, cs, 2)
	assert.Contains(t, cs[0].Message(), "once (idempotent, unnamed in the baseline) keys its state")
}

// scoped returns l applied to tools only.
func scoped(l plan.Layer, tools ...string) plan.Layer {
	l.Tools = tools
	return l
}
