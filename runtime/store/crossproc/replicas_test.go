package crossproc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// replicas builds n pipelines of one plan whose store "shared" is b under a
// prefix of the test's own: n replicas of one service, each with its own
// connections to the shared server.
func replicas(t *testing.T, b backend, n int, chains plan.Chains, tools map[string]runtime.ToolFunc) []*runtime.Pipeline {
	t.Helper()
	e := workerEnv{backend: b.kind, url: b.url, prefix: storetest.Prefix(t)}
	p := e.sharedPlan(chains)
	out := make([]*runtime.Pipeline, n)
	for i := range out {
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: tools})
		require.NoError(t, err)
		t.Cleanup(func() { _ = pl.Close() })
		out[i] = pl
	}
	return out
}

func tenantCtx(tenant, run string) context.Context {
	return runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: tenant})
}

// TestACancelledReplicaLeavesTheCallInDoubt: a replica whose caller goes
// away while a side-effecting tool runs keeps its claim; the duplicate on
// another replica, waiting or arriving later, finds the call in doubt and
// never runs it again.
func TestACancelledReplicaLeavesTheCallInDoubt(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			var runs atomic.Int32
			started := make(chan struct{}, 1)
			charge := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
				runs.Add(1)
				started <- struct{}{}
				<-ctx.Done() // the caller goes away while the charge may have been made
				return nil, ctx.Err()
			}
			pls := replicas(t, b, 2, plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "1s"}`)}},
				map[string]runtime.ToolFunc{"charge": charge})
			req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}
			ctx, cancel := context.WithCancel(tenantCtx("acme", "r1"))
			first := make(chan error, 1)
			go func() { _, err := pls[0].Tool(ctx, req); first <- err }()
			<-started
			waiting := make(chan error, 1)
			go func() { _, err := pls[1].Tool(tenantCtx("acme", "r1"), req); waiting <- err }()
			time.Sleep(100 * time.Millisecond) // the duplicate finds the claim held and waits
			cancel()
			require.ErrorIs(t, <-first, context.Canceled)
			select {
			case err := <-waiting:
				assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "the waiting duplicate: %v", err)
			case <-time.After(15 * time.Second):
				t.Fatal("the duplicate waited for good")
			}
			_, err := pls[1].Tool(tenantCtx("acme", "r1"), req)
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "a later duplicate: %v", err)
			assert.Equal(t, int32(1), runs.Load(), "the charge ran once")
		})
	}
}

// TestTenantsAcrossReplicas: with scope "key" on a shared store, each
// tenant's state is one across the replicas and never another tenant's:
// concurrent single-flight misses run once per tenant, a calls budget admits
// exactly its ceiling per tenant, a rate limit exactly its burst per tenant.
func TestTenantsAcrossReplicas(t *testing.T) {
	tenants := []string{"acme", "globex"}
	// hammer makes per concurrent calls of req for each tenant on each
	// replica and returns the successes and other errors by tenant.
	hammer := func(t *testing.T, pls []*runtime.Pipeline, per int, req runtime.ToolRequest, refused func(error) bool) (map[string]int, map[string][]any) {
		var mu sync.Mutex
		ok, values := map[string]int{}, map[string][]any{}
		var wg sync.WaitGroup
		for i, pl := range pls {
			for _, tenant := range tenants {
				for j := range per {
					wg.Go(func() {
						r, err := pl.Tool(tenantCtx(tenant, fmt.Sprintf("r%d-%d", i, j)), req)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							ok[tenant]++
							values[tenant] = append(values[tenant], r.Value)
						case !refused(err):
							t.Errorf("%s: %v", tenant, err)
						}
					})
				}
			}
		}
		wg.Wait()
		return ok, values
	}
	never := func(error) bool { return false }
	for _, b := range backends(t) {
		t.Run(b.kind+"/memoize", func(t *testing.T) {
			var mu sync.Mutex
			execs := map[string]int{}
			lookup := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
				tenant := runtime.RunOf(ctx).Tenant
				mu.Lock()
				execs[tenant]++
				mu.Unlock()
				time.Sleep(200 * time.Millisecond)
				return tenant + "'s balance", nil
			}
			pls := replicas(t, b, 2, plan.Chains{Tool: []plan.Layer{rt.Layer("memoize",
				`{"store": "shared", "scope": "key", "single_flight": true, "lease_ttl": "5s"}`)}},
				map[string]runtime.ToolFunc{"lookup": lookup})
			ok, values := hammer(t, pls, 8, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"q": "balance"}}, never)
			for _, tenant := range tenants {
				assert.Equal(t, 16, ok[tenant], tenant)
				assert.Equal(t, 1, execs[tenant], "%s: one execution across the replicas", tenant)
				for _, v := range values[tenant] {
					assert.Equal(t, tenant+"'s balance", v, "%s is served only its own result", tenant)
				}
			}
		})
		t.Run(b.kind+"/meter", func(t *testing.T) {
			var mu sync.Mutex
			execs := map[string]int{}
			lookup := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
				mu.Lock()
				execs[runtime.RunOf(ctx).Tenant]++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				return 1, nil
			}
			pls := replicas(t, b, 2, plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget": {"calls": 10}, "scope": "key", "store": "shared"}`)}},
				map[string]runtime.ToolFunc{"lookup": lookup})
			budget := func(err error) bool { var be *runtime.BudgetError; return errors.As(err, &be) }
			ok, _ := hammer(t, pls, 12, runtime.ToolRequest{Name: "lookup"}, budget)
			for _, tenant := range tenants {
				assert.Equal(t, 10, ok[tenant], "%s: its ceiling across the replicas", tenant)
				assert.Equal(t, 10, execs[tenant], tenant)
			}
		})
		t.Run(b.kind+"/rate_limit", func(t *testing.T) {
			pls := replicas(t, b, 2, plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit",
				`{"rate": 1, "per": "1h", "burst": 5, "mode": "reject", "scope": "key", "store": "shared"}`)}},
				map[string]runtime.ToolFunc{"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return 1, nil }})
			limited := func(err error) bool { return runtime.KindOf(err) == "rate_limited" }
			ok, _ := hammer(t, pls, 10, runtime.ToolRequest{Name: "lookup"}, limited)
			for _, tenant := range tenants {
				assert.Equal(t, 5, ok[tenant], "%s: its burst across the replicas", tenant)
			}
		})
	}
}
