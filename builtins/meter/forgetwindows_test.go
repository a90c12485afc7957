package meter_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

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
			layer := "hourly_" + strconv.FormatInt(time.Now().UnixNano(), 36)
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named(layer, rt.Layer("meter",
				`{"budget":{"calls":5},"scope":"run","window":"1h","store":"shared"}`))}})
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
			ctx := runtime.WithRun(context.Background(), run)
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
