package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// gatedSettle is a ledger store whose first `fail` settlements fail at
// once, as against a store out of reach, and whose next one (the first
// resend) waits in flight until released: with pass it then reaches the
// store, else it fails. A later settlement (the close's) releases it.
type gatedSettle struct {
	runtime.Budgeter
	fail     int64
	settles  atomic.Int64
	entered  chan struct{}
	release  chan struct{}
	released sync.Once
	pass     atomic.Bool
	// ended is set once the settlement in flight has returned.
	ended atomic.Bool
}

func (g *gatedSettle) Close() error { return nil }

func (g *gatedSettle) Settle(ctx context.Context, key, id string, c runtime.Ledger, ttl time.Duration) error {
	switch n := g.settles.Add(1); {
	case n <= g.fail:
		return errors.New("dial tcp: connection refused")
	case n == g.fail+1:
		close(g.entered)
		<-g.release
		defer g.ended.Store(true)
		if !g.pass.Load() {
			return errors.New("dial tcp: connection refused")
		}
	default:
		g.pass.Store(true)
		g.released.Do(func() { close(g.release) })
	}
	return g.Budgeter.Settle(ctx, key, id, c, ttl)
}

// A settlement a timer was sending again when the pipeline closed (its
// round trip against a store out of reach takes as long as the store's
// timeout) was neither sent by the close, which saw only those still
// waiting, nor waited for: the process exited with the charge neither in
// the ledger nor in the log. The close now waits for it, within its 2 s:
// it is settled, or logged with its charge.
func TestClosingWaitsForTheSettlementBeingSent(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var direct runtime.StoreBackend
			if store == "redis" {
				direct = storetest.Redis(t)
			} else {
				direct = storetest.Postgres(t)
			}
			usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
			model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				yield(runtime.Delta{Text: "x", Usage: usage})
				return nil
			})
			pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"shared","scope":"global"}`)}})
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
			reader := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": direct}})
			ledger := reader.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)

			// run builds a pipeline on g, makes calls calls whose
			// settlements fail, starts their resends and returns once one
			// of them is in flight, with the pipeline and the resends' end.
			run := func(g *gatedSettle, calls int, logs *rt.LogBuffer) (*runtime.Pipeline, <-chan struct{}) {
				clock := runtime.NewVirtualClock(time.Now())
				built, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Backends: map[string]runtime.StoreBackend{"shared": g}, Clock: clock, Logger: slog.New(slog.NewTextHandler(logs, nil))})
				require.NoError(t, err)
				for range calls {
					_, _, err = rt.Collect(context.Background(), built, req, 0)
					require.NoError(t, err)
				}
				resent := make(chan struct{})
				go func() {
					defer close(resent)
					clock.Advance(time.Second) // the resends fall due
				}()
				<-g.entered
				return built, resent
			}

			t.Run("logged", func(t *testing.T) {
				g := &gatedSettle{Budgeter: direct.(runtime.Budgeter), fail: 1, entered: make(chan struct{}), release: make(chan struct{})}
				var logs rt.LogBuffer
				built, resent := run(g, 1, &logs)
				require.NoError(t, built.Close())
				out := logs.String()
				assert.Equal(t, 1, strings.Count(out, "it is unconfirmed"), "the charge is logged, its outcome unknown: %s", out)
				assert.Contains(t, out, "charge_usd=")
				assert.NotContains(t, out, "charge_usd=0 ", "with its charge")
				g.released.Do(func() { close(g.release) }) // its answer, a failure, comes after the close
				<-resent
				assert.Equal(t, 1, strings.Count(logs.String(), "the ledger store stayed out of reach"), "logged as lost once it failed")
				m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
				assert.Equal(t, int64(1), m.LostSettlements(), "counted lost")
				assert.True(t, m.Done(), "its counts change no more")
			})

			// A settlement still being sent when the close stopped
			// waiting for it was logged and counted as lost, though it
			// reached the store a moment later: the metric and the log
			// said lost while the ledger had the charge. The close now
			// logs it as unconfirmed, with its charge, and counts it lost
			// only if its send then fails (above).
			t.Run("landed after the close", func(t *testing.T) {
				meter.SetCleanupTimeout(t, 50*time.Millisecond) // the send is held past it
				g := &gatedSettle{Budgeter: direct.(runtime.Budgeter), fail: 1, entered: make(chan struct{}), release: make(chan struct{})}
				defer g.released.Do(func() { close(g.release) })
				var logs rt.LogBuffer
				before := ledger.Ledger("").Calls
				built, resent := run(g, 1, &logs)
				m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
				require.NoError(t, built.Close())
				out := logs.String()
				assert.NotContains(t, out, "stayed out of reach", "not lost: its outcome is not known yet")
				assert.Equal(t, 1, strings.Count(out, "it is unconfirmed"), "logged as unconfirmed: %s", out)
				assert.NotContains(t, out, "charge_usd=0 ", "with its charge")
				assert.Equal(t, int64(1), m.UnconfirmedSettlements())
				assert.False(t, m.Done(), "its send is still out")

				g.pass.Store(true)
				g.released.Do(func() { close(g.release) }) // it lands after the close
				<-resent
				assert.Equal(t, before+1, ledger.Ledger("").Calls, "the store has the charge")
				assert.Zero(t, m.LostSettlements(), "it is not counted lost")
				assert.NotContains(t, logs.String(), "stayed out of reach")
				assert.True(t, m.Done(), "its counts change no more")
			})

			t.Run("settled", func(t *testing.T) {
				// Two settlements wait: the close sends one (which lets
				// the one in flight reach the store) and waits for the
				// other.
				g := &gatedSettle{Budgeter: direct.(runtime.Budgeter), fail: 2, entered: make(chan struct{}), release: make(chan struct{})}
				var logs rt.LogBuffer
				before := ledger.Ledger("").Calls
				built, resent := run(g, 2, &logs)
				require.NoError(t, built.Close())
				assert.True(t, g.ended.Load(), "the close returned only once the settlement in flight had ended")
				assert.NotContains(t, logs.String(), "stayed out of reach")
				<-resent
				assert.Equal(t, before+2, ledger.Ledger("").Calls, "both calls are charged, once each")
			})
		})
	}
}

// The close waited for the settlements being sent again up to 2 s per
// ledger store, one store after the other: with two stores out of reach,
// 4 s. It now waits for every store at once, within the one 2 s.
func TestClosingWaitsForEveryStoreAtOnce(t *testing.T) {
	usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: usage})
		return nil
	})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"budget":{"usd":1},"store":"a","scope":"global"}`),
		rt.Layer("meter", `{"budget":{"usd":1},"store":"b","scope":"global"}`),
	}})
	p.Stores = map[string]plan.Store{"a": {Kind: "memory"}, "b": {Kind: "memory"}}
	gates := []*gatedSettle{
		{Budgeter: storetest.Redis(t), fail: 1, entered: make(chan struct{}), release: make(chan struct{})},
		{Budgeter: storetest.Redis(t), fail: 1, entered: make(chan struct{}), release: make(chan struct{})},
	}
	defer func() {
		for _, g := range gates {
			g.released.Do(func() { close(g.release) })
		}
	}()
	// The process's clock: each resend falls due on a timer of its own,
	// and stays in flight.
	var logs rt.LogBuffer
	built, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"a": gates[0], "b": gates[1]}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), built, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
	require.NoError(t, err)
	for _, g := range gates {
		<-g.entered
	}

	// Both stores' closes wait for their settlement in flight at once: the
	// second starts to wait while the first still waits, whose settlement
	// is held until both do. One after the other, the second would start
	// only once the first gave up.
	meter.SetCleanupTimeout(t, time.Hour)
	waiting := make(chan struct{}, 2)
	meter.OnCleanupWait(t, func() { waiting <- struct{}{} })
	closed := make(chan error, 1)
	go func() { closed <- built.Close() }()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	for i := range 2 {
		select {
		case <-waiting:
		case <-bound.C:
			require.FailNow(t, "the close of one store did not wait while the other's did", "%d of 2 waiting", i)
		}
	}
	select {
	case err := <-closed:
		require.FailNow(t, "the close returned with the settlements still in flight", "%v", err)
	default:
	}
	for _, g := range gates {
		g.released.Do(func() { close(g.release) }) // each fails
	}
	require.NoError(t, <-closed)
	assert.Equal(t, 2, strings.Count(logs.String(), "the ledger store stayed out of reach"), "each charge is logged as lost: %s", logs.String())
}

// stallingClose is a ledger store out of reach for the calls' own
// settlements (which fail at once), whose answer to the close's (those
// with a deadline) never comes before their deadline; late counts those
// of the close that came with their deadline already passed.
type stallingClose struct {
	runtime.Budgeter
	late atomic.Int64
}

func (s *stallingClose) Close() error { return nil }

func (s *stallingClose) Settle(ctx context.Context, key, id string, c runtime.Ledger, ttl time.Duration) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("dial tcp: connection refused")
	}
	if ctx.Err() != nil {
		s.late.Add(1)
	}
	<-ctx.Done()
	return ctx.Err()
}

// waitingForTheClose builds a pipeline whose meter settles in store,
// logged to logs, on a virtual clock that never advances, and makes
// calls calls: their settlements, failed, wait for the close, which waits
// 50ms for them.
func waitingForTheClose(t *testing.T, store runtime.StoreBackend, calls int, logs *rt.LogBuffer) (*runtime.Pipeline, *meter.Meter) {
	t.Helper()
	usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: usage})
		return nil
	})
	pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"shared","scope":"global"}`)}})
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	meter.SetCleanupTimeout(t, 50*time.Millisecond)
	built, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": store},
		Clock:    runtime.NewVirtualClock(time.Now()), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	for range calls {
		_, _, err = rt.Collect(context.Background(), built, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
		require.NoError(t, err)
	}
	require.Equal(t, calls, meter.Waiting(m))
	return built, m
}

// The close's own attempt at a settlement waiting, cut short by its
// deadline, may have reached the store (only the answer was not
// awaited): it is unconfirmed, not lost.
func TestTheClosesAttemptCutShortIsUnconfirmed(t *testing.T) {
	var logs rt.LogBuffer
	built, m := waitingForTheClose(t, &stallingClose{Budgeter: storetest.Redis(t)}, 1, &logs)

	require.NoError(t, built.Close())
	assert.Equal(t, 1, strings.Count(logs.String(), "it is unconfirmed"), "logged as unconfirmed: %s", logs.String())
	assert.NotContains(t, logs.String(), "stayed out of reach")
	assert.Equal(t, int64(1), m.UnconfirmedSettlements())
	assert.Zero(t, m.LostSettlements())
	assert.True(t, m.Done(), "the close's attempt has ended")
}

// The close sends the settlements waiting MaxResending at a time: one
// whose turn came after the deadline was never sent, yet it was logged
// as unconfirmed ("the store may have taken it") like those whose round
// trip the deadline cut. It is lost, and logged so.
func TestASettlementTheCloseNeverSentIsLost(t *testing.T) {
	var logs rt.LogBuffer
	store := &stallingClose{Budgeter: storetest.Redis(t)}
	built, m := waitingForTheClose(t, store, meter.MaxResending+1, &logs)

	require.NoError(t, built.Close())
	assert.Zero(t, store.late.Load(), "nothing is sent past the deadline")
	assert.Equal(t, int64(meter.MaxResending), m.UnconfirmedSettlements(), "those whose round trip the deadline cut")
	assert.Equal(t, int64(1), m.LostSettlements(), "the one never sent")
	assert.Equal(t, 1, strings.Count(logs.String(), "the ledger store stayed out of reach"), logs.String())
	assert.True(t, m.Done())
}
