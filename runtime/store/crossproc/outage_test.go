package crossproc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func TestAStoreOutageFailsClosedAndResumes(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			px := storetest.NewProxy(t, b.url)
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{
				rt.Layer("rate_limit", `{"rate": 1000, "burst": 100, "mode": "reject", "store": "shared"}`),
				rt.Layer("meter", `{"budget": {"calls": 1000}, "scope": "global", "store": "shared"}`),
				rt.Layer("idempotent", `{"store": "shared"}`),
			}})
			p.Stores = map[string]plan.Store{"shared": {Kind: b.kind, URL: px.URL, Prefix: storetest.Prefix(t)}}
			p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}}
			var mu sync.Mutex
			ran := map[string]int{}
			pay := func(_ context.Context, c *runtime.ToolCall) (any, error) {
				mu.Lock()
				ran[c.Args["order_id"].(string)]++
				mu.Unlock()
				return "paid " + c.Args["order_id"].(string), nil
			}
			pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": pay}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})
			call := func(order string) (runtime.ToolResult, error) {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				return pl.Tool(cctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": order}})
			}
			_, err := call("A1")
			require.NoError(t, err)

			px.Cut()
			for _, order := range []string{"A1", "A2"} {
				_, err := call(order)
				require.Error(t, err, "the store is down: the call fails closed")
				assert.NotEqual(t, runtime.ClassOK, runtime.Classify(err))
			}
			mu.Lock()
			assert.Equal(t, map[string]int{"A1": 1}, ran, "nothing ran while the store was down")
			mu.Unlock()

			px.Restore()
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err = call("A2")
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.NoError(t, err, "service resumes once the store is back")
			r, err := call("A1")
			require.NoError(t, err)
			assert.True(t, r.Deduped, "the call made before the outage is not executed again")
			mu.Lock()
			assert.Equal(t, map[string]int{"A1": 1, "A2": 1}, ran, "nothing executed twice")
			mu.Unlock()
		})
	}
}
