package crossproc_test

import (
	"context"
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

// Each protective layer alone, on a store that stops answering (a server
// paused, a network that drops everything) or goes away, fails closed: the
// tool does not run, and the error is a store failure naming the layer.
// The timeout (2 s) leaves room for the healthy first call on a machine
// loaded by other work (1 s did not, at a load average of 28).
func TestEachLayerFailsClosedWhenItsStoreFails(t *testing.T) {
	layers := map[string]plan.Layer{
		"audit":          rt.Layer("audit", `{"sink": "shared"}`),
		"idempotent":     rt.Layer("idempotent", `{"store": "shared"}`),
		"idempotent_key": rt.Layer("idempotent", `{"store": "shared", "key_args": ["order_id"]}`),
		"meter":          rt.Layer("meter", `{"budget": {"calls": 1000}, "scope": "global", "store": "shared"}`),
		"meter_run":      rt.Layer("meter", `{"budget": {"calls": 1000}, "store": "shared"}`),
		"rate_limit":     rt.Layer("rate_limit", `{"rate": 1000, "burst": 100, "mode": "reject", "store": "shared"}`),
		"rate_limit_key": rt.Layer("rate_limit", `{"rate": 1000, "burst": 100, "scope": "key", "store": "shared"}`),
	}
	for _, b := range backends(t) {
		for name, layer := range layers {
			for _, how := range []string{"stall", "cut"} {
				t.Run(b.kind+"/"+name+"/"+how, func(t *testing.T) {
					px := storetest.NewProxy(t, b.url)
					p := rt.Plan(plan.Chains{Tool: []plan.Layer{layer}})
					p.Stores = map[string]plan.Store{"shared": {Kind: b.kind, URL: px.URL, Prefix: storetest.Prefix(t), Timeout: "2s"}}
					p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}}
					var ran atomic.Int32
					pay := func(context.Context, *runtime.ToolCall) (any, error) {
						ran.Add(1)
						return "paid", nil
					}
					pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": pay}})
					ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1", Tenant: "shop"})
					_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "A1"}})
					require.NoError(t, err)
					require.Equal(t, int32(1), ran.Load())

					if how == "stall" {
						px.Stall()
					} else {
						px.Cut()
					}
					start := time.Now()
					_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "A2"}})
					took := time.Since(start)
					require.Error(t, err, "the store fails: the call fails closed")
					assert.ErrorIs(t, err, runtime.ErrStoreUnavailable)
					assert.Equal(t, int32(1), ran.Load(), "the tool did not run")
					assert.Less(t, took, 8*time.Second, "within the store's timeout, not the caller's")
					t.Logf("%s refused in %v: %v", name, took, err)
				})
			}
		}
	}
}
