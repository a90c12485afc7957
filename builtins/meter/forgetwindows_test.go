package meter_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// windowedRun builds a pipeline whose meter, of a layer named afresh,
// budgets each run's chat calls within window in store, and returns it,
// the layer's name, a run that cannot continue and its context.
func windowedRun(t *testing.T, window string, store runtime.StoreBackend, clock runtime.Clock) (*runtime.Pipeline, string, runtime.Run, context.Context) {
	layer := "windowed_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named(layer, rt.Layer("meter",
		`{"budget":{"calls":5},"scope":"run","window":"`+window+`","store":"shared"}`))}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10}})
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": store}, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	run := runtime.Run{ID: "anon-" + layer, Ephemeral: true}
	return pl, layer, run, runtime.WithRun(context.Background(), run)
}

// The end of a run dropped the ledger of its window of the moment only: a
// run of scope "run" with a window that spanned three windows left the
// ledgers of the first two behind until they expired, in memory, Redis and
// PostgreSQL (a sqlite store holds no ledgers). Every
// window's ledger the run was charged in is now dropped when it ends.
func TestTheEndOfARunDropsTheLedgersOfEveryWindow(t *testing.T) {
	for _, name := range []string{"memory", "redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2031, 3, 10, 9, 0, 0, 0, time.UTC)
			clock := runtime.NewVirtualClock(start.Add(10 * time.Minute))
			store, ledgers := windowBackends[name](t, clock)
			pl, layer, run, ctx := windowedRun(t, "1h", store, clock)
			key := func(hour int) string {
				return "agentc/meter/chat/" + layer + "/window/3600s/" + strconv.FormatInt(start.Add(time.Duration(hour)*time.Hour).Unix(), 10) + "/run/" + run.ID
			}
			for hour := range 3 {
				_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
				require.NoError(t, err)
				l, err := ledgers.LedgerOf(context.Background(), key(hour))
				require.NoError(t, err)
				require.Equal(t, int64(1), l.Calls, "hour %d", hour)
				if hour < 2 {
					clock.Advance(time.Hour)
				}
			}
			pl.EndRun(run.ID)
			for hour := range 3 {
				l, err := ledgers.LedgerOf(context.Background(), key(hour))
				require.NoError(t, err)
				assert.Equal(t, runtime.Ledger{}, l, "the ledger of hour %d is dropped with the run", hour)
			}
		})
	}
}

// forgetCount is a Redis store that counts the ledgers dropped.
type forgetCount struct {
	redisAt
	n *atomic.Int64
}

func (s forgetCount) ForgetLedger(ctx context.Context, key string) error {
	s.n.Add(1)
	return s.redisAt.ForgetLedger(ctx, key)
}

// The windows a run was charged in were noted for good, one a window: a
// run that went on for long, with a short window, held ever more of them
// (a minute's window, 1,440 a day), each call looked through them all,
// and its end dropped ledgers that had expired long before. Only the
// windows whose ledgers may still be kept (windowKeep after they end, and
// as long again for a settlement sent again) are noted.
func TestARunNotesOnlyTheWindowsWhoseLedgersMayBeKept(t *testing.T) {
	start := time.Date(2031, 3, 10, 9, 0, 0, 0, time.UTC)
	clock := runtime.NewVirtualClock(start.Add(10 * time.Second))
	var forgets atomic.Int64
	store := forgetCount{redisAt{storetest.Redis(t), clock}, &forgets}
	pl, _, run, ctx := windowedRun(t, "1m", store, clock)
	const minutes = 180
	for range minutes {
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
		require.NoError(t, err)
		clock.Advance(time.Minute)
	}
	pl.EndRun(run.ID)
	// The windows of the last two hours (windowKeep, twice) and the
	// window of the moment; the 60 before have expired.
	assert.LessOrEqual(t, forgets.Load(), int64(122), "the ledgers dropped at the end of the run")
	assert.GreaterOrEqual(t, forgets.Load(), int64(120))
}
