package meter_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// viaProxy returns a test store of kind name reached through a proxy, the
// proxy, and the same store reached directly.
func viaProxy(t *testing.T, name string) (runtime.StoreBackend, *storetest.Proxy, runtime.StoreBackend) {
	ctx := context.Background()
	var (
		s, direct runtime.StoreBackend
		p         *storetest.Proxy
		err       error
	)
	switch name {
	case "redis":
		d := storetest.Redis(t)
		p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
		s, err = redis.Open(ctx, p.URL, strings.TrimSuffix(d.Prefix(), ":"), redis.WithTimeout(time.Second))
		direct = d
	default:
		d := storetest.Postgres(t)
		p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
		s, err = postgres.Open(ctx, p.URL, d.Schema(), postgres.WithTimeout(2*time.Second))
		direct = d
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, p, direct
}

// A settlement that never reached the store (an outage after the call ran)
// was logged and dropped, and the reservation, lapsing, gave the calls
// ceiling its call back; one whose answer was lost could not be sent again
// without charging twice. The meter now sends a failed settlement again in
// the background, and the store settles a reservation once: the call is
// charged once either way, and the ceiling holds.
func TestALostSettlementIsChargedOnce(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		for _, loss := range []string{"outage", "answer lost"} {
			t.Run(store+"/"+loss, func(t *testing.T) {
				s, p, _ := viaProxy(t, store)
				var calls atomic.Int64
				usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
				model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
					if calls.Add(1) == 1 {
						if loss == "outage" {
							p.Cut() // until after the first attempts to settle
							time.AfterFunc(2*time.Second, p.Restore)
						} else {
							p.LoseNextReply() // the settlement's
						}
					}
					yield(runtime.Delta{Text: "x", Usage: usage})
					return nil
				})
				pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":2},"store":"shared","scope":"global"}`)}})
				pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
				built, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Backends: map[string]runtime.StoreBackend{"shared": s}})
				require.NoError(t, err)
				m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
				req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

				_, _, err = rt.Collect(context.Background(), built, req, 0)
				require.NoError(t, err, "the call ran; settling it is the meter's own business")
				require.Eventually(t, func() bool { return m.Ledger("").Calls > 0 }, 10*time.Second, 20*time.Millisecond,
					"the settlement is sent again once the store answers")
				// Once none waits or is being sent, no further attempt
				// can come.
				require.Eventually(t, func() bool { return meter.Waiting(m) == 0 }, 10*time.Second, 20*time.Millisecond,
					"the settlement stops being sent once the store took it")
				assert.Equal(t, runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: m.Cost("primary", usage), Calls: 1}, m.Ledger(""), "charged once")

				_, _, err = rt.Collect(context.Background(), built, req, 0)
				require.NoError(t, err, "one call of two charged, none pending")
				_, _, err = rt.Collect(context.Background(), built, req, 0)
				var be *runtime.BudgetError
				require.ErrorAs(t, err, &be, "the ceiling of two calls holds")
				assert.Equal(t, 2.0, be.Spent)
				assert.Zero(t, be.Pending)
			})
		}
	}
}

// A settlement still waiting to be sent again when the pipeline closes is
// sent by the close, before the stores go, rather than left to a timer
// that would fire against a closed store.
func TestClosingSendsTheSettlementsWaiting(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			s, p, direct := viaProxy(t, store)
			usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
			model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				p.Cut() // the settlement fails
				yield(runtime.Delta{Text: "x", Usage: usage})
				return nil
			})
			pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":2},"store":"shared","scope":"global"}`)}})
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			built, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": s}})
			require.NoError(t, err)
			// A second pipeline on the same ledger reads it once the first
			// has closed its store.
			reader, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": direct}})
			require.NoError(t, err)
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

			_, _, err = rt.Collect(context.Background(), built, req, 0)
			require.NoError(t, err)
			p.Restore()
			require.NoError(t, built.Close())
			m := reader.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			assert.Equal(t, int64(1), m.Ledger("").Calls, "the close sent the settlement waiting")
		})
	}
}

// A settlement the store did not take was sent again for 5 minutes and
// then given up: an outage of the store longer than that lost the charge
// of every call it caught in flight (with on_cross "allow" its whole
// cost: the reservation, lapsing, is charged one call and nothing more).
// It is now sent again for half of runtime.SettleMemory, within which the
// store still settles it once.
func TestASettlementOutlivesALongOutage(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			s, p, direct := viaProxy(t, store)
			usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
			model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				p.Cut() // the store goes down while the call runs
				yield(runtime.Delta{Text: "x", Usage: usage})
				return nil
			})
			clock := runtime.NewVirtualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"shared","scope":"global"}`)}})
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			built := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": s}, Clock: clock})
			reader := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": direct}, Clock: clock})
			m := reader.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

			_, _, err := rt.Collect(context.Background(), built, req, 0)
			require.NoError(t, err)
			clock.Advance(20 * time.Minute) // a resend fails: the store is still down
			assert.Zero(t, m.Ledger("").Calls)
			p.Restore()
			for range 3 { // the next resend is due within the backoff's 10 s
				clock.Advance(10 * time.Second)
			}
			assert.Equal(t, runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: m.Cost("primary", usage), Calls: 1}, m.Ledger(""),
				"charged once the store is back")
		})
	}
}

// A settlement still waiting to be sent again when a reload closed the
// pipeline it belonged to was sent once more within 2 s and then given
// up, though the next version of the policy kept the store open: a reload
// during a stall of the store of a few seconds lost the call's charge
// (with on_cross "allow" the whole of it). The settlements waiting are now
// sent again, for the usual window, for as long as a pipeline of the
// process holds the store; only the close of its last one gives up.
func TestAReloadKeepsSendingTheSettlementsWaiting(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var (
				p        *storetest.Proxy
				declared plan.Store
				direct   runtime.StoreBackend
			)
			switch store {
			case "redis":
				d := storetest.Redis(t)
				p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
				declared = plan.Store{Kind: "redis", URL: p.URL, Prefix: strings.TrimSuffix(d.Prefix(), ":"), Timeout: "1s"}
				direct = d
			default:
				d := storetest.Postgres(t)
				p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
				declared = plan.Store{Kind: "postgres", URL: p.URL, Prefix: d.Schema(), Timeout: "2s"}
				direct = d
			}
			usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
			var cut atomic.Bool
			model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				if !cut.Swap(true) {
					p.Cut() // the store stalls while the call runs
				}
				yield(runtime.Delta{Text: "x", Usage: usage})
				return nil
			})
			pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"shared","scope":"global"}`)}})
			pl.Stores = map[string]plan.Store{"shared": declared}
			pool := runtime.NewStorePool()
			deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, StorePool: pool}
			old, err := runtime.Build(context.Background(), pl, deps)
			require.NoError(t, err)
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
			_, _, err = rt.Collect(context.Background(), old, req, 0)
			require.NoError(t, err)

			// The reload: the new version takes the store from the pool,
			// and the old one closes while the store is still out of reach.
			next, err := runtime.Build(context.Background(), pl, deps)
			require.NoError(t, err)
			t.Cleanup(func() { _ = next.Close() })
			require.NoError(t, old.Close())
			require.Equal(t, 1, pool.Open(), "the new version holds the store")
			p.Restore()

			reader := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": direct}})
			m := reader.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			require.Eventually(t, func() bool { return m.Ledger("").Calls > 0 }, 20*time.Second, 20*time.Millisecond,
				"the settlement is sent again once the store answers")
			assert.Equal(t, runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: m.Cost("primary", usage), Calls: 1}, m.Ledger(""),
				"the call is charged once, in full")
		})
	}
}
