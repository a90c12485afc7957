package meter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
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
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// ownRedis is a Redis server of the test's own, on a port of its own, to
// stop and start again.
type ownRedis struct {
	t    *testing.T
	bin  string
	port int
	cmd  *exec.Cmd
}

// startOwnRedis starts a Redis server of the test's own, or skips the test.
func startOwnRedis(t *testing.T) *ownRedis {
	storetest.ServerURL(t, storetest.RedisEnv) // a Redis is at hand
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &ownRedis{t: t, bin: bin, port: l.Addr().(*net.TCPAddr).Port}
	require.NoError(t, l.Close())
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *ownRedis) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// start starts the server and waits until it accepts connections.
func (s *ownRedis) start() {
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(s.t, s.cmd.Start())
	require.Eventually(s.t, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
}

// kill stops the server, its data with it.
func (s *ownRedis) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// The settlements a store out of reach did not take waited to be sent
// again without bound, each on a timer of its own: an outage under load
// grew them, their timers and the memory they hold for as long as it
// lasted. At most maxResends wait now. Past it, a settlement is given up
// at once, logged with its charge and counted; a meter with a budget
// refuses calls before they run (it would add settlements the store may
// not take), as it does when the store fails.
func TestAStoreOutageKeepsABoundedBacklog(t *testing.T) {
	const limit, calls = 500, 3000
	usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: usage})
		return nil
	})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	build := func(t *testing.T, config string, logs *rt.LogBuffer) (*ownRedis, *meter.Meter, *runtime.Pipeline) {
		meter.SetMaxResends(t, limit)
		srv := startOwnRedis(t)
		s, err := redis.Open(context.Background(), srv.url(), "backlog", redis.WithTimeout(time.Second))
		require.NoError(t, err)
		pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", config)}})
		pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
		built := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Backends: map[string]runtime.StoreBackend{"shared": s}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return srv, built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter), built
	}

	t.Run("without a budget", func(t *testing.T) {
		var logs rt.LogBuffer
		srv, m, built := build(t, `{"store":"shared","scope":"global"}`, &logs)
		srv.kill()
		lost := m.LostSettlements()
		for range calls {
			_, _, err := rt.Collect(context.Background(), built, req, 0)
			require.NoError(t, err, "a meter without a budget lets the call run")
		}
		assert.Equal(t, limit, meter.Waiting(m), "the settlements waiting stop at the bound")
		assert.Equal(t, int64(calls-limit), m.LostSettlements()-lost, "each settlement past the bound is counted")
		assert.Equal(t, calls-limit, strings.Count(logs.String(), "the call's charge is lost"), "and logged")
		assert.Contains(t, logs.String(), fmt.Sprintf("%d settlements already wait to be sent again", limit))

		srv.start() // empty: the ledger holds what the resends bring
		require.Eventually(t, func() bool { return meter.Waiting(m) == 0 }, 30*time.Second, 20*time.Millisecond,
			"the settlements waiting are sent once the store is back")
		l := m.Ledger("")
		assert.InDelta(t, limit*m.Cost("primary", usage), l.USD, 1e-9)
		assert.Equal(t, runtime.Ledger{InputTokens: 10 * limit, OutputTokens: 5 * limit, USD: l.USD, Calls: limit},
			l, "each settlement kept is charged once")
	})

	t.Run("with a budget", func(t *testing.T) {
		var logs rt.LogBuffer
		srv, m, built := build(t, `{"budget":{"calls":1000000},"store":"shared","scope":"global"}`, &logs)
		srv.kill()
		lost := m.LostSettlements()
		full := 0
		for range calls {
			_, _, err := rt.Collect(context.Background(), built, req, 0)
			require.Error(t, err, "a store out of reach fails the call closed")
			assert.True(t, runtime.DidNotRun(err), "before it ran: %v", err)
			if strings.Contains(err.Error(), "settlements wait to be sent again to the ledger store") {
				full++
			}
		}
		assert.Equal(t, limit, meter.Waiting(m), "the releases of the reservations tried stop at the bound")
		assert.Equal(t, calls-limit, full, "past it the meter does not even try the store")
		assert.Zero(t, m.LostSettlements()-lost, "no settlement is given up")

		srv.start()
		require.Eventually(t, func() bool { return meter.Waiting(m) == 0 }, 30*time.Second, 20*time.Millisecond,
			"the settlements waiting are sent once the store is back")
		_, _, err := rt.Collect(context.Background(), built, req, 0)
		require.NoError(t, err, "calls are admitted again")
		assert.Equal(t, int64(1), m.Ledger("").Calls, "the calls refused charged nothing")
	})
}

// stalledSettle is a ledger store whose settlements fail at once while
// down is set, and otherwise wait in flight until release is closed; it
// notes the most in flight at once.
type stalledSettle struct {
	runtime.Budgeter
	down             atomic.Bool
	release          chan struct{}
	inflight, most   atomic.Int64
	barrier          int64 // with arrived: release closes once barrier settlements are in flight
	arrived, settled atomic.Int64
}

func (s *stalledSettle) Close() error { return nil }

func (s *stalledSettle) Settle(ctx context.Context, key, id string, c runtime.Ledger, ttl time.Duration) error {
	if s.down.Load() {
		return errors.New("dial tcp: connection refused")
	}
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	if s.barrier > 0 && s.arrived.Add(1) == s.barrier {
		close(s.release)
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.settled.Add(1)
	return s.Budgeter.Settle(ctx, key, id, c, ttl)
}

// Each settlement waiting was sent again on a timer of its own, in a
// goroutine of its own: a store that stalls, rather than refuses, held
// one goroutine, and one round trip, per settlement waiting. At most
// maxResending are sent at once now; the others wait their turn.
func TestResendsAreSentAFewAtOnce(t *testing.T) {
	const calls = 200
	usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: usage})
		return nil
	})
	s := &stalledSettle{Budgeter: storetest.Redis(t), release: make(chan struct{})}
	s.down.Store(true)
	pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"store":"shared","scope":"global"}`)}})
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	built := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": s}, Logger: slog.New(slog.DiscardHandler)})
	m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	for range calls {
		_, _, err := rt.Collect(context.Background(), built, req, 0)
		require.NoError(t, err)
	}
	require.Equal(t, calls, meter.Waiting(m))

	s.down.Store(false) // the store now stalls
	require.Eventually(t, func() bool { return s.inflight.Load() == meter.MaxResending }, 10*time.Second, 5*time.Millisecond,
		"the resends fall due and stall")
	assert.Never(t, func() bool { return s.most.Load() > meter.MaxResending }, 500*time.Millisecond, 5*time.Millisecond,
		"the others, falling due meanwhile, wait their turn")
	close(s.release)
	require.Eventually(t, func() bool { return meter.Waiting(m) == 0 }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(calls), m.Ledger("").Calls, "each is charged once")
	assert.LessOrEqual(t, s.most.Load(), int64(meter.MaxResending))
}

// The close sent the settlements still waiting one after the other,
// within its 2 s: against a store slower than 2 s divided by their
// number, most were dropped. It now sends them maxResending at a time.
func TestClosingSendsTheSettlementsWaitingTogether(t *testing.T) {
	const calls = 300
	usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: usage})
		return nil
	})
	direct := storetest.Redis(t)
	// The store answers no settlement until 8 are in flight together:
	// sent one at a time, the first waits for the close's deadline.
	s := &stalledSettle{Budgeter: direct, release: make(chan struct{}), barrier: 8}
	s.down.Store(true)
	pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"store":"shared","scope":"global"}`)}})
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	var logs rt.LogBuffer
	// On a virtual clock left still, no resend falls due: the close
	// sends them all.
	built, err := runtime.Build(context.Background(), pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": s}, Clock: runtime.NewVirtualClock(time.Now()),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	reader := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": direct}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	for range calls {
		_, _, err := rt.Collect(context.Background(), built, req, 0)
		require.NoError(t, err)
	}

	s.down.Store(false)
	require.NoError(t, built.Close())
	assert.NotContains(t, logs.String(), "stayed out of reach", "none is given up")
	assert.Equal(t, int64(calls), s.settled.Load())
	assert.Equal(t, int64(calls), reader.Layers(plan.StageChat)[0].Middleware.(*meter.Meter).Ledger("").Calls, "each is charged")
	assert.LessOrEqual(t, s.most.Load(), int64(meter.MaxResending), "a few at a time")
}
