package roundtrips_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	_ "github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"

	_ "github.com/agentc-dev/agentc/builtins/all"
)

// hotPath is one layer's hot path: the chain that holds the layer over a
// store named "shared", and the call whose round trips count (made once
// beforehand, so scripts are loaded, statements prepared and the replay or
// hit is there to find).
type hotPath struct {
	name string
	// what one operation is, for the figures.
	what   string
	chains plan.Chains
	// trips is the round trips one call makes.
	trips int64
	// kvOnly marks a layer a sqlite store can serve.
	kvOnly bool
	call   func(context.Context, *runtime.Pipeline) error
}

func toolCall(name string) func(context.Context, *runtime.Pipeline) error {
	return func(ctx context.Context, pl *runtime.Pipeline) error {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: name, Args: map[string]any{"order_id": "A1"}})
		return err
	}
}

func chatCall(ctx context.Context, pl *runtime.Pipeline) error {
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", MaxTokens: 10,
		Messages: []runtime.Message{{Role: "user", Content: "hello"}}}, 0)
	return err
}

var hotPaths = []hotPath{{
	name: "idempotent-replay", what: "a repeated side-effecting call answered from the idempotency table",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared"}`)}},
	trips:  1, kvOnly: true, call: toolCall("pay"),
}, {
	name: "memoize-hit", what: "a read-only tool call served from the cache",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("memoize", `{"store": "shared", "scope": "global"}`)}},
	trips:  1, kvOnly: true, call: toolCall("lookup"),
}, {
	name: "memoize-hit-single_flight", what: "the same, with single_flight: the cache entry is a lease record",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("memoize", `{"store": "shared", "scope": "global", "single_flight": true}`)}},
	trips:  1, kvOnly: true, call: toolCall("lookup"),
}, {
	name: "rate_limit-check", what: "a tool call admitted by a rate limit",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit",
		`{"rate": 1000000000, "per": "1s", "burst": 1000000000, "mode": "reject", "scope": "global", "store": "shared"}`)}},
	trips: 1, call: toolCall("lookup"),
}, {
	name: "meter-reserve-settle", what: "a tool call reserved against a calls budget before it runs and settled after",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget": {"calls": 1000000000}, "scope": "global", "store": "shared"}`)}},
	trips:  2, call: toolCall("lookup"),
}, {
	name: "meter-on_cross-refuse", what: "a model call checked against a usd budget with its estimate, reserved and settled",
	chains: plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget": {"usd": 1000000}, "on_cross": "refuse", "scope": "global", "store": "shared"}`)}},
	trips:  2, call: chatCall,
}, {
	name: "audit-call", what: "one audited tool call: its intent record before the call and its outcome after",
	chains: plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"sink": "shared"}`)}},
	trips:  2, kvOnly: true, call: toolCall("pay"),
}}

// backend is a store kind the hot paths run on.
type backend struct {
	name string
	// store declares "shared" for a test; counted reports whether its
	// round trips are counted.
	store   func(testing.TB) plan.Store
	counted bool
	kvOnly  bool
}

var backends = []backend{
	{name: "memory", store: func(testing.TB) plan.Store { return plan.Store{Kind: "memory"} }},
	{name: "sqlite", kvOnly: true, store: func(t testing.TB) plan.Store {
		return plan.Store{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "state.db")}
	}},
	{name: "redis", counted: true, store: func(t testing.TB) plan.Store {
		url := storetest.ServerURL(t, storetest.RedisEnv)
		prefix := storetest.Prefix(t)
		t.Cleanup(func() { dropRedis(url, prefix) })
		return plan.Store{Kind: countedRedis, URL: url, Prefix: prefix}
	}},
	{name: "postgres", counted: true, store: func(t testing.TB) plan.Store {
		url := storetest.ServerURL(t, storetest.PostgresEnv)
		prefix := storetest.Prefix(t)
		t.Cleanup(func() { dropPostgres(url, prefix) })
		return plan.Store{Kind: countedPostgres, URL: url, Prefix: prefix}
	}},
}

func dropRedis(url, prefix string) {
	s, err := redis.Open(context.Background(), url, prefix)
	if err != nil {
		return
	}
	defer s.Close()
	ctx := context.Background()
	if keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result(); len(keys) > 0 {
		s.Client().Del(ctx, keys...)
	}
}

func dropPostgres(url, schema string) {
	s, err := postgres.Open(context.Background(), url, schema)
	if err != nil {
		return
	}
	defer s.Close()
	_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
}

// build builds the hot path's chain over the backend's store and makes
// its call twice: the first call fills the table, cache or ledger and
// loads scripts or prepares statements, the second is the hot path once.
func build(t testing.TB, b backend, h hotPath) (*runtime.Pipeline, context.Context, *wire) {
	t.Helper()
	store := b.store(t)
	p := rt.Plan(h.chains)
	p.Stores = map[string]plan.Store{"shared": store}
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}, "lookup": {}}
	ok := func(context.Context, *runtime.ToolCall) (any, error) { return map[string]any{"ok": true}, nil }
	pl := rt.Build(t, p, runtime.Deps{
		Tools:  map[string]runtime.ToolFunc{"pay": ok, "lookup": ok},
		Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"hi"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 2}})},
	})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1", Tenant: "acme"})
	for range 2 {
		require.NoError(t, h.call(ctx, pl))
	}
	var w *wire
	if b.counted {
		w = wireOf(store.Prefix)
	}
	return pl, ctx, w
}

// TestOneRoundTripPerLayer asserts the round trips of each layer's hot
// path on redis and postgres.
func TestOneRoundTripPerLayer(t *testing.T) {
	for _, b := range backends {
		if !b.counted {
			continue
		}
		for _, h := range hotPaths {
			t.Run(b.name+"/"+h.name, func(t *testing.T) {
				pl, ctx, w := build(t, b, h)
				const calls = 5
				before := w.trips.Load()
				for range calls {
					require.NoError(t, h.call(ctx, pl))
				}
				require.Equal(t, h.trips*calls, w.trips.Load()-before,
					"round trips of %d calls: want %d each", calls, h.trips)
			})
		}
	}
}

// BenchmarkHotPath measures each hot path on each store kind that can
// serve it, reporting the round trips per call for the networked ones.
func BenchmarkHotPath(b *testing.B) {
	for _, be := range backends {
		for _, h := range hotPaths {
			if be.kvOnly && !h.kvOnly {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", h.name, be.name), func(b *testing.B) {
				pl, ctx, w := build(b, be, h)
				var before int64
				if w != nil {
					before = w.trips.Load()
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := h.call(ctx, pl); err != nil {
						b.Fatal(err)
					}
				}
				if w != nil {
					b.ReportMetric(float64(w.trips.Load()-before)/float64(b.N), "trips/op")
				}
			})
		}
	}
}
