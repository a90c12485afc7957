package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// Replicas sharing a bucket in redis or postgres whose clocks disagree (a
// host's injected clock, a replica 30 s behind another): the bucket is
// kept on the store's clock, so a replica whose clock is ahead does not
// make every other wait its lead on top of the interval, and one whose
// clock is behind neither waits its lag on top of it nor finds a fresh
// burst. The in-process limiter, whose clock a step moves, keeps the
// bucket's debt across it (runtime.MemoryRateLimiter).
func TestReplicasWithSkewedClocksShareOneBucket(t *testing.T) {
	for _, kind := range []string{"redis", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var s runtime.StoreBackend
			if kind == "redis" {
				s = storetest.Redis(t)
			} else {
				s = storetest.Postgres(t)
			}
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1m","burst":2,"mode":"reject","store":"shared"}`)}})
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			now := time.Now()
			replica := func(skew time.Duration) *runtime.Pipeline {
				return rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": rt.NewTool(rt.ToolResult{Value: 1}).Func()},
					Backends: map[string]runtime.StoreBackend{"shared": s}, Clock: runtime.NewVirtualClock(now.Add(skew))})
			}
			ahead, exact, behind := replica(30*time.Second), replica(0), replica(-30*time.Second)
			ctx := context.Background()
			refused := func(pl *runtime.Pipeline) time.Duration {
				t.Helper()
				_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
				var ce *runtime.CallError
				require.ErrorAs(t, err, &ce, "the burst is used up")
				return ce.RetryAfter
			}

			for range 2 {
				_, err := ahead.Tool(ctx, runtime.ToolRequest{Name: "t"})
				require.NoError(t, err, "the burst")
			}
			// One slot comes back a minute after the burst, for every
			// replica alike: not 30 s sooner, nor later.
			assert.InDelta(t, time.Minute.Seconds(), refused(exact).Seconds(), 5, "the replica ahead did not add its lead")
			assert.InDelta(t, time.Minute.Seconds(), refused(behind).Seconds(), 5, "the replica behind finds no fresh burst, nor waits its lag as well")
			assert.InDelta(t, time.Minute.Seconds(), refused(ahead).Seconds(), 5)
		})
	}
}
