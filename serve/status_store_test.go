package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	_ "github.com/agentc-dev/agentc/runtime/store/postgres"
	_ "github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestSharedStoreTimeoutIsUnavailable: a shared store that stops answering
// (its `timeout` passing) refuses the call in the layer that needs it
// (meter, rate_limit, idempotent); that is the gateway's store being
// unavailable, not the model timing out: 503 with Retry-After, never 504.
func TestSharedStoreTimeoutIsUnavailable(t *testing.T) {
	for kind, env := range map[string]string{"redis": storetest.RedisEnv, "postgres": storetest.PostgresEnv} {
		raw := os.Getenv(env)
		if raw == "" {
			t.Logf("%s not set: %s skipped", env, kind)
			continue
		}
		for name, layer := range map[string]plan.Layer{
			"meter":      rt.Layer("meter", `{"scope": "run", "budget": {"calls": 100}, "store": "shared"}`),
			"rate_limit": rt.Layer("rate_limit", `{"rate": 100, "per": "1m", "mode": "reject", "scope": "run", "store": "shared"}`),
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				proxy := storetest.NewProxy(t, raw)
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{layer}})
				prefix := storetest.Prefix(t)
				if kind == "postgres" {
					t.Cleanup(func() { dropSchema(t, raw, prefix) })
				}
				p.Stores = map[string]plan.Store{"shared": {Kind: kind, URL: proxy.URL, Prefix: prefix, Timeout: "300ms"}}
				model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
				pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
				t.Cleanup(proxy.Cut) // before the pipeline closes its connections
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
				req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
				answered(t, ctx, pl, req)
				calls := model.Calls()

				proxy.Stall()
				_, err := pl.Complete(ctx, req) // ctx has no deadline: only the store's timeout ends the call
				require.Error(t, err)
				assert.True(t, timedOut(err), "ended by the store's timeout: %v", err)
				assert.Equal(t, calls, model.Calls(), "the call did not run")
				code, delay := StatusOf(err)
				assert.Equal(t, http.StatusServiceUnavailable, code, "%v", err)
				assert.GreaterOrEqual(t, delay, time.Second, "%v", err)
				assert.Equal(t, "store_unavailable", runtime.KindOf(err), "%v", err)
			})
		}
	}
}

// timedOut reports whether err is, or wraps, a timeout: a deadline
// passing, or a network operation timing out.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// answered makes the call req on pl until the store answers it. The
// store's timeout bounds each statement by the wall clock: on a loaded
// machine a store that answers may answer one later than that, which
// fails the call as the store's timeout does, and nothing else may.
func answered(t *testing.T, ctx context.Context, pl *runtime.Pipeline, req runtime.ChatRequest) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := pl.Complete(ctx, req)
		if err == nil {
			return
		}
		require.Equal(t, "store_unavailable", runtime.KindOf(err), "the store answers: %v", err)
		require.True(t, time.Now().Before(deadline), "the store answers: %v", err)
	}
}
