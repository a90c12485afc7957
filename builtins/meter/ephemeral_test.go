package meter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// The ledger of a run in a shared store was kept for a day after the run
// ended, however it ended: a request the gateway gave a run of its own
// (anon-..., which no client can name again) or a call made without a run
// left a ledger behind each, that no replica would ever read. The ledger
// of a run that cannot continue (runtime.Run.Ephemeral) is now dropped
// when it ends; a named run's is still kept, as another replica may serve
// it.
func TestTheLedgerOfARunThatCannotContinueIsDropped(t *testing.T) {
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var direct runtime.StoreBackend
			if store == "redis" {
				direct = storetest.Redis(t)
			} else {
				direct = storetest.Postgres(t)
			}
			var seen runtime.Run
			model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
				seen = runtime.RunOf(ctx)
				yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10}})
				return nil
			})
			pl := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":5},"store":"shared","scope":"run"}`)}})
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			built := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": direct}})
			m := built.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

			for _, run := range []runtime.Run{{ID: "anon-1", Ephemeral: true}, {ID: "case-9"}} {
				_, _, err := rt.Collect(runtime.WithRun(context.Background(), run), built, req, 0)
				require.NoError(t, err)
				require.Equal(t, int64(1), m.Ledger(run.ID).Calls)
				built.EndRun(run.ID)
			}
			assert.Equal(t, runtime.Ledger{}, m.Ledger("anon-1"), "the ended run's ledger is dropped from the store")
			assert.Equal(t, int64(1), m.Ledger("case-9").Calls, "a named run's ledger is kept: another replica may serve it")

			// A call made without a run gets one of its own, that ends
			// with the call.
			_, _, err := rt.Collect(context.Background(), built, req, 0)
			require.NoError(t, err)
			require.True(t, seen.Ephemeral, "the call's own run cannot continue")
			assert.Equal(t, runtime.Ledger{}, m.Ledger(seen.ID), "its ledger is dropped when the call returns")
		})
	}
}
