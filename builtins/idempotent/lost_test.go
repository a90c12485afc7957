package idempotent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim whose answer was lost (the store applied it, the connection
// failed before the reply) fails the call closed without running it; the
// next attempt gets the claim back and runs the call once, instead of
// finding it held and then in doubt. A postgres store asks again itself,
// on another connection, so the first attempt runs the call.
func TestARetryAfterALostClaimRunsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		open      func(t *testing.T, p *storetest.Proxy) runtime.StoreBackend
		env       string
		asksAgain bool
	}{
		{"redis", func(t *testing.T, p *storetest.Proxy) runtime.StoreBackend {
			direct := storetest.Redis(t)
			s, err := redis.Open(context.Background(), p.URL, strings.TrimSuffix(direct.Prefix(), ":"), redis.WithTimeout(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}, storetest.RedisEnv, false},
		{"postgres", func(t *testing.T, p *storetest.Proxy) runtime.StoreBackend {
			direct := storetest.Postgres(t)
			s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(2*time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}, storetest.PostgresEnv, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := storetest.NewProxy(t, storetest.ServerURL(t, tc.env))
			shared := tc.open(t, p)
			pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`))
			pl.Tools["refund"] = plan.Tool{SideEffecting: true}
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			var calls atomic.Int64
			b := rt.Build(t, pl, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": shared},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					calls.Add(1)
					return "R1", nil
				}}})
			req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
			// Warm up: the store's statements and scripts are known to the
			// server, so the lost answer is the claim's.
			_, err := b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "warm"}})
			require.NoError(t, err)
			p.LoseNextReply()
			r, err := b.Tool(ctx1, req)
			if !tc.asksAgain {
				require.ErrorContains(t, err, "the call did not run")
				assert.EqualValues(t, 1, calls.Load(), "the lost claim ran nothing")
				r, err = b.Tool(ctx1, req)
			}
			require.NoError(t, err, "the retry gets its claim back: not held, not in doubt")
			assert.Equal(t, "R1", r.Value)
			assert.False(t, r.Deduped)
			assert.EqualValues(t, 2, calls.Load(), "the refund ran once")
			r, err = b.Tool(ctx1, req)
			require.NoError(t, err)
			assert.True(t, r.Deduped, "a duplicate replays it")
		})
	}
}
