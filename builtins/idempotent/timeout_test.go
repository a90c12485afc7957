package idempotent_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// twoClients opens the shared store twice, as two replicas each with its
// own connection to one server.
func twoClients(t *testing.T, kind string) (a, b runtime.StoreBackend) {
	ctx := context.Background()
	switch kind {
	case "redis":
		a := storetest.Redis(t)
		b, err := redis.Open(ctx, storetest.ServerURL(t, storetest.RedisEnv), strings.TrimSuffix(a.Prefix(), ":"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return a, b
	default:
		a := storetest.Postgres(t)
		b, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), a.Schema())
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		return a, b
	}
}

// A tool that timed out while it ran (its own deadline, an upstream's 504)
// may have made its effect: a duplicate on another replica finds the call in
// doubt, instead of running the refund a second time. A retry_safe tool's
// duplicate takes the claim in doubt over and runs it again.
func TestATimedOutCallIsInDoubtOnAnotherReplica(t *testing.T) {
	for _, kind := range []string{"redis", "postgres"} {
		for _, retrySafe := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/retry_safe=%v", kind, retrySafe), func(t *testing.T) {
				sa, sb := twoClients(t, kind)
				p := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`))
				p.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: retrySafe}
				p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
				var calls atomic.Int64
				refund := func(context.Context, *runtime.ToolCall) (any, error) {
					if calls.Add(1) == 1 { // the refund went out; its answer did not come back in time
						return nil, &runtime.CallError{Status: 504, Message: "payments gateway timed out"}
					}
					return "R1", nil
				}
				replica := func(s runtime.StoreBackend) *runtime.Pipeline {
					return rt.Build(t, p, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": s},
						Tools: map[string]runtime.ToolFunc{"refund": refund}})
				}
				a, b := replica(sa), replica(sb)
				req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
				_, err := a.Tool(ctx1, req)
				require.ErrorContains(t, err, "timed out")

				r, err := b.Tool(ctx1, req)
				if retrySafe {
					require.NoError(t, err)
					assert.Equal(t, "R1", r.Value)
					assert.EqualValues(t, 2, calls.Load(), "a retry_safe tool runs again")
					return
				}
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "the duplicate does not run the refund again")
				assert.EqualValues(t, 1, calls.Load())
			})
		}
	}
}
