package runtime_test

import (
	"encoding/json"
	"slices"
	"sort"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// fuzzBasePlan is a plan with a layer of each kind that keeps state, keys
// of two tenants and an MCP server's tools, which mutatePlan changes.
const fuzzBasePlan = `{"version": 1, "policy": "p",
 "tools": {"refund": {"side_effecting": true}, "payout": {"side_effecting": true}, "lookup": {}, "fs_write": {"side_effecting": true}},
 "stores": {"shared": {"kind": "redis", "url_env": "REDIS_URL", "prefix": "billing"}, "other": {"kind": "redis", "url_env": "OTHER_URL"}},
 "keys": {"agent": {"sha256": "aa", "tenant": "shop"}, "ops": {"env": "OPS_KEY", "tenant": "ops"}},
 "mcp_servers": {"fs": {"command": ["fs-server", "/data"], "prefix": "fs_"}},
 "chains": {
  "chat": [
   {"use": "meter", "name": "meter", "config": {"store": "shared", "scope": "key", "budget": {"usd": 5}}},
   {"use": "memoize", "name": "memoize", "config": {"store": "shared", "scope": "key", "ttl": "10m"}},
   {"use": "semantic_memoize", "name": "semantic_memoize", "config": {"index": "shared", "scope": "key", "threshold": 0.9, "ttl": "10m"}}],
  "tool": [
   {"use": "idempotent", "name": "idempotent", "tools": ["refund", "fs_write"], "config": {"store": "shared", "ttl": "24h", "key_args": ["order_id"]}, "when": {"stage": "tool", "phase": "before", "source": "tool.name != 'payout'"}},
   {"use": "guard", "name": "guard", "config": {"deny": "tool.name == 'refund'", "message": "no refunds"}},
   {"use": "rate_limit", "name": "tool_rate", "config": {"store": "other", "rate": 6, "per": "1m", "scope": "run"}}],
  "turn": [
   {"use": "rate_limit", "name": "rate_limit", "config": {"store": "shared", "rate": 6, "per": "1m", "scope": "key"}},
   {"use": "checkpoint", "name": "checkpoint", "config": {"store": "shared", "keep": 10}}]}}`

// fuzzValues are the values a mutation writes.
var fuzzValues = []any{"shared", "other", "refund", "payout", "fs_write", "key", "run", "global", "", "1h", "idempotent",
	"meter", 0.0, 1.0, 60.0, true, false, nil, []any{}, map[string]any{}, []any{"refund"}, []any{"order_id", "amount"}}

// mutatePlan applies to a copy of base the mutations ops spells, two bytes
// each: the first picks a place in the document, the second what is done
// there (a value replaced, removed, or a list's elements swapped or
// repeated).
func mutatePlan(base any, ops []byte) any {
	doc := clone(base)
	for len(ops) >= 2 {
		at, op := int(ops[0]), int(ops[1])
		ops = ops[2:]
		var places []func(any)
		var removes []func()
		collectPlaces(doc, func(set func(any), remove func()) {
			places = append(places, set)
			removes = append(removes, remove)
		})
		if len(places) == 0 {
			break
		}
		i := at % len(places)
		if op%4 == 0 {
			removes[i]()
		} else {
			places[i](clone(fuzzValues[op%len(fuzzValues)]))
		}
	}
	return doc
}

// collectPlaces calls add, for each value under v (v excluded), with a
// function that replaces it and one that removes it.
func collectPlaces(v any, add func(set func(any), remove func())) {
	switch c := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add(func(x any) { c[k] = x }, func() { delete(c, k) })
			collectPlaces(c[k], add)
		}
	case []any:
		for i := range c {
			add(func(x any) { c[i] = x }, func() {
				// A list's element is swapped with the first instead:
				// its length stays.
				c[0], c[i] = c[i], c[0]
			})
			collectPlaces(c[i], add)
		}
	}
}

func clone(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// FuzzStateChanges: two mutations of a policy's plan are compared without
// a panic, each change described in a sentence, and a plan compared with
// itself has no change.
func FuzzStateChanges(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{}, []byte{3, 1})
	f.Add([]byte{7, 2, 40, 0}, []byte{7, 5, 90, 3})
	f.Add([]byte{12, 21}, []byte{12, 17, 200, 4, 33, 8})
	var base any
	if err := json.Unmarshal([]byte(fuzzBasePlan), &base); err != nil {
		f.Fatal(err)
	}
	toPlan := func(doc any) *plan.Plan {
		b, err := json.Marshal(doc)
		if err != nil {
			return nil
		}
		var p plan.Plan
		if json.Unmarshal(b, &p) != nil {
			return nil
		}
		return &p
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		old, next := toPlan(mutatePlan(base, a)), toPlan(mutatePlan(base, b))
		if old == nil || next == nil {
			return
		}
		for _, c := range runtime.StateChanges(old, next) {
			if c.Message() == "" {
				t.Fatalf("%+v: no message", c)
			}
		}
		for _, c := range runtime.CoverageChanges(old, next) {
			if c.Message() == "" {
				t.Fatalf("%+v: no message", c)
			}
		}
		if cs := runtime.StateChanges(old, old); len(cs) > 0 {
			msgs := make([]string, len(cs))
			for i, c := range cs {
				msgs[i] = c.Message()
			}
			t.Fatalf("a plan compared with itself: %q", slices.Compact(msgs))
		}
	})
}
