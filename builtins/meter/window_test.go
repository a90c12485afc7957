package meter_test

import (
	"context"
	"errors"
	"strconv"
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

// windowBackends are the ledger stores a window is checked on: process
// memory (a memory store follows the pipeline's clock) and the two shared
// stores, whose servers tell the time of clock (redisAt, postgresAt): a
// shared store's windows follow its server's clock.
var windowBackends = map[string]func(t *testing.T, clock runtime.Clock) (runtime.StoreBackend, runtime.Budgeter){
	"memory": func(*testing.T, runtime.Clock) (runtime.StoreBackend, runtime.Budgeter) {
		s := runtime.NewMemoryStore()
		return s, s
	},
	"redis": func(t *testing.T, clock runtime.Clock) (runtime.StoreBackend, runtime.Budgeter) {
		s := redisAt{storetest.Redis(t), clock}
		return s, s
	},
	"postgres": func(t *testing.T, clock runtime.Clock) (runtime.StoreBackend, runtime.Budgeter) {
		s := postgresAt{storetest.Postgres(t), clock}
		return s, s
	},
}

// redisAt and postgresAt are a test server whose time (StoreIDAt) is
// clock's.
type (
	redisAt struct {
		*redis.Store
		clock runtime.Clock
	}
	postgresAt struct {
		*postgres.Store
		clock runtime.Clock
	}
)

func (s redisAt) StoreIDAt(ctx context.Context) (string, time.Time, error) {
	id, _, err := s.Store.StoreIDAt(ctx)
	return id, s.clock.Now(), err
}

func (s postgresAt) StoreIDAt(ctx context.Context) (string, time.Time, error) {
	id, _, err := s.Store.StoreIDAt(ctx)
	return id, s.clock.Now(), err
}

// A daily budget starts afresh at 00:00 UTC, in a ledger of its own, on
// every store: a call admitted before midnight and ending after it is
// charged to the day it was admitted in, so it takes nothing from the next
// day's budget; that day's ledger in memory is dropped an hour after the
// day ends. The clock is virtual: nothing sleeps.
func TestADailyBudgetStartsAfreshAtMidnightUTC(t *testing.T) {
	for _, name := range []string{"memory", "redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			day1 := time.Date(2031, 3, 10, 0, 0, 0, 0, time.UTC)
			clock := runtime.NewVirtualClock(day1.Add(24*time.Hour - 2*time.Minute))
			store, ledgers := windowBackends[name](t, clock)
			// A layer name of its own per run, so that runs against a
			// shared server never meet an earlier run's ledgers.
			layer := "daily_" + strconv.FormatInt(time.Now().UnixNano(), 36)
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named(layer, rt.Layer("meter",
				`{"budget":{"calls":2},"scope":"key","window":"24h","store":"shared"}`))}})
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			// The model call asked for "midnight" ends three minutes later,
			// after the day's end.
			model := runtime.ModelFunc(func(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				if req.Messages[0].Content == "midnight" {
					clock.Advance(3 * time.Minute)
				}
				yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}})
				return nil
			})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": store}, Clock: clock})
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"})
			call := func(content string) error {
				_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: content}}}, 0)
				return err
			}
			require.NoError(t, call("before"))
			require.NoError(t, call("midnight"), "admitted at 23:59 on day one, settled at 00:01 on day two")
			require.True(t, clock.Now().After(day1.Add(24*time.Hour)))

			// Day two has its whole budget: the late settlement went to day one.
			require.NoError(t, call("a"))
			require.NoError(t, call("b"), "the call that ended after midnight took nothing from day two")
			err = call("c")
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be)
			assert.Equal(t, "calls", be.Resource)
			assert.Equal(t, "key", be.Scope)
			assert.Equal(t, "24h", be.Window)
			assert.Equal(t, day1.Add(48*time.Hour), be.Resets)
			assert.Contains(t, err.Error(), "calls ceiling 2 reached (spent 2); per-key budget of the 24h window that resets at 2031-03-12T00:00:00Z")

			// Each day's ledger, under a key that holds the window's start.
			key := func(day time.Time) string {
				return "agentc/meter/chat/" + layer + "/window/86400s/" + strconv.FormatInt(day.Unix(), 10) + "/key/acme"
			}
			l1, err := ledgers.LedgerOf(context.Background(), key(day1))
			require.NoError(t, err)
			assert.Equal(t, [2]int64{2, 30}, [2]int64{l1.Calls, l1.Tokens()}, "day one: both calls it admitted")
			l2, err := ledgers.LedgerOf(context.Background(), key(day1.Add(24*time.Hour)))
			require.NoError(t, err)
			assert.Equal(t, [2]int64{2, 30}, [2]int64{l2.Calls, l2.Tokens()})

			// A shared store expires a day's ledger an hour after the day
			// ends (its ttl counted on the store's clock from each write).
			switch s := store.(type) {
			case redisAt:
				d1, err := s.Client().PTTL(context.Background(), s.Prefix()+key(day1)).Result()
				require.NoError(t, err)
				assert.InDelta(t, time.Hour.Seconds(), d1.Seconds(), 60, "day one: an hour after its end (written at 00:01)")
				d2, err := s.Client().PTTL(context.Background(), s.Prefix()+key(day1.Add(24*time.Hour))).Result()
				require.NoError(t, err)
				assert.InDelta(t, (24*time.Hour + 59*time.Minute).Seconds(), d2.Seconds(), 60, "day two: an hour after its end")
			case postgresAt:
				for day, want := range map[time.Time]time.Duration{day1: time.Hour, day1.Add(24 * time.Hour): 24*time.Hour + 59*time.Minute} {
					var secs float64
					require.NoError(t, s.Pool().QueryRow(context.Background(),
						"SELECT extract(epoch FROM expires - now()) FROM "+s.Schema()+".ledger WHERE key = $1", key(day)).Scan(&secs))
					assert.InDelta(t, want.Seconds(), secs, 60, day)
				}
			}
			if name == "memory" {
				clock.Advance(time.Hour)
				l1, err = ledgers.LedgerOf(context.Background(), key(day1))
				require.NoError(t, err)
				assert.Equal(t, runtime.Ledger{}, l1, "day one's ledger is dropped an hour after the day")
			}
		})
	}
}

// A window of scope "run" gives each run a budget per window; "month"
// follows the calendar (February is shorter than "720h").
func TestWindowsOfRunsAndMonths(t *testing.T) {
	start := time.Date(2031, 2, 28, 23, 0, 0, 0, time.UTC)
	clock := runtime.NewVirtualClock(start)
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("per_run_hour", rt.Layer("meter", `{"budget":{"calls":1},"scope":"run","window":"1h"}`)),
		rt.Named("monthly", rt.Layer("meter", `{"budget":{"calls":3},"scope":"key","window":"month"}`)),
	}})
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Clock: clock})
	require.NoError(t, err)
	call := func(run string) error {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: "acme"})
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
		return err
	}
	require.NoError(t, call("r1"))
	var be *runtime.BudgetError
	require.ErrorAs(t, call("r1"), &be, "the run's hour is spent")
	assert.Equal(t, "per_run_hour", be.Layer)
	assert.Equal(t, start.Add(time.Hour), be.Resets)
	require.NoError(t, call("r2"), "another run has its own hour")
	clock.Advance(time.Hour)
	require.NoError(t, call("r1"), "a new hour (and a new month, March) for the run")
	require.NoError(t, call("r2"))
	require.NoError(t, call("r3"))
	require.ErrorAs(t, call("r4"), &be, "March's three calls are spent")
	assert.Equal(t, "monthly", be.Layer)
	assert.Equal(t, "month", be.Window)
	assert.Equal(t, time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC), be.Resets)
	assert.Contains(t, be.Message(), "per-key budget of the month window that resets at 2031-04-01T00:00:00Z")
}

func TestWindowValidate(t *testing.T) {
	for _, tc := range []struct{ window, want string }{
		{"500ms", "window must be at least 1s"},
		{"8785h", "window must be at most 8784h"},
		{"1.5s", "whole number of seconds"},
		{"daily", `window must be a duration such as "24h", or "month"`},
	} {
		_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"window":"`+tc.window+`"}`)}}), runtime.Deps{})
		assert.ErrorContains(t, err, tc.want, tc.window)
	}
	for _, ok := range []string{"1s", "8784h", "24h", "month"} {
		_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"window":"`+ok+`"}`)}}), runtime.Deps{})
		assert.NoError(t, err, ok)
	}
}

// A tenant's daily budget beside a per-run one, in one chain: each keeps
// its own ledger and refuses with its own error; a call the inner meter
// refuses is not charged to the outer one.
func TestADailyTenantBudgetBesideARunBudget(t *testing.T) {
	day := time.Date(2031, 5, 6, 9, 0, 0, 0, time.UTC)
	clock := runtime.NewVirtualClock(day)
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("tenant_daily", rt.Layer("meter", `{"budget":{"calls":3},"scope":"key","window":"24h"}`)),
		rt.Named("per_run", rt.Layer("meter", `{"budget":{"calls":2},"scope":"run"}`)),
	}})
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 7}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Clock: clock})
	require.NoError(t, err)
	daily := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	perRun := pl.Layers(plan.StageChat)[1].Middleware.(*meter.Meter)
	call := func(tenant, run string) error {
		// Runs named as agentc serve names them: each tenant's apart.
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runtime.TenantRunID(tenant, run), Tenant: tenant})
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
		return err
	}
	var be *runtime.BudgetError
	require.NoError(t, call("acme", "r1"))
	require.NoError(t, call("acme", "r1"))
	require.ErrorAs(t, call("acme", "r1"), &be)
	assert.Equal(t, "per_run", be.Layer)
	assert.Equal(t, "run", be.Scope)
	assert.Empty(t, be.Window)
	assert.Equal(t, int64(2), daily.Ledger("acme/r1").Calls, "the call the run's budget refused is not charged to the tenant's day")

	require.NoError(t, call("acme", "r2"))
	require.ErrorAs(t, call("acme", "r2"), &be)
	assert.Equal(t, "tenant_daily", be.Layer)
	assert.Equal(t, "key", be.Scope)
	assert.Equal(t, "24h", be.Window)
	assert.Contains(t, be.Message(), "calls ceiling 3 reached (spent 3); per-key budget of the 24h window that resets at 2031-05-07T00:00:00Z")
	assert.Equal(t, int64(3), daily.Ledger("acme/r2").Calls)
	assert.Equal(t, int64(1), perRun.Ledger("acme/r2").Calls)
	require.NoError(t, call("globex", "r1"), "another tenant has its own day, and its run r1 its own budget")

	clock.Advance(15 * time.Hour) // 00:00 UTC the next day
	require.NoError(t, call("acme", "r2"), "the tenant's day starts afresh")
	assert.Equal(t, int64(1), daily.Ledger("acme/r2").Calls)
	assert.Equal(t, int64(2), perRun.Ledger("acme/r2").Calls, "a run's budget without a window is kept")
	require.ErrorAs(t, call("acme", "r2"), &be)
	assert.Equal(t, "per_run", be.Layer)
}

// skewedClock is the real clock, off by skew.
type skewedClock struct {
	runtime.RealClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time { return time.Now().Add(c.skew) }

// Two replicas whose clocks are a day apart charge a tenant's daily budget
// to the same day, the one the shared store's server is in: a call on each
// does not get the budget of two days. Their windows were read on their
// own clocks, and each admitted its call.
func TestReplicasWithSkewedClocksChargeOneWindow(t *testing.T) {
	for _, s := range storetest.SharedStores(t)[1:] {
		t.Run(s.Name, func(t *testing.T) {
			layer := "daily_" + strconv.FormatInt(time.Now().UnixNano(), 36)
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named(layer, rt.Layer("meter",
				`{"budget":{"calls":1},"scope":"key","window":"24h","store":"shared"}`))}})
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1}})
			replica := func(skew time.Duration) *runtime.Pipeline {
				pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Backends: map[string]runtime.StoreBackend{"shared": s.KV.(runtime.StoreBackend)}, Clock: skewedClock{skew: skew}})
				require.NoError(t, err)
				t.Cleanup(func() { _ = pl.Close() })
				return pl
			}
			ahead, behind := replica(24*time.Hour), replica(0)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"})
			_, _, err := rt.Collect(ctx, ahead, runtime.ChatRequest{Model: "primary"}, 0)
			require.NoError(t, err)
			_, _, err = rt.Collect(ctx, behind, runtime.ChatRequest{Model: "primary"}, 0)
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be, "the day's one call was made on the replica whose clock is a day ahead")
			assert.Equal(t, "calls", be.Resource)
			start := time.Now().UTC().Truncate(24 * time.Hour)
			assert.WithinDuration(t, start.Add(24*time.Hour), be.Resets, time.Minute, "the server's day")
		})
	}
}

// redisMute is a redis store whose server's time cannot be read.
type redisMute struct{ *redis.Store }

func (redisMute) StoreIDAt(context.Context) (string, time.Time, error) {
	return "", time.Time{}, errors.New("the time is out of reach")
}

// A replica that cannot read the server's time before its first call
// cannot tell which window the call falls in: the call is refused as
// store_unavailable, and does not run.
func TestAWindowWithoutTheServersTimeFailsClosed(t *testing.T) {
	store := redisMute{storetest.Redis(t)}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":5},"scope":"key","window":"24h","store":"shared"}`)}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": store}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	_, _, err = rt.Collect(runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"}), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorIs(t, err, runtime.ErrStoreUnavailable)
	assert.ErrorContains(t, err, "the time is out of reach")
	assert.Zero(t, model.Calls())
}
