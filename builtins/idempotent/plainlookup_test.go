package idempotent_test

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
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// countingRedis counts the claims, releases and publications a layer asks
// a Redis store for.
type countingRedis struct {
	*redis.Store
	n atomic.Int64
}

func (c *countingRedis) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	c.n.Add(1)
	return c.Store.AcquireAs(ctx, key, owner, note, lease, keep, takeover)
}

func (c *countingRedis) Release(ctx context.Context, key string, token int64) error {
	c.n.Add(1)
	return c.Store.Release(ctx, key, token)
}

func (c *countingRedis) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	c.n.Add(1)
	return c.Store.Publish(ctx, key, token, result, keep)
}

// TestPlainLookupCanBeTurnedOff: with settings.digest_key_env a fresh call
// also claims and releases its plain key of before, two more round trips
// than without the key (4 against 2), for as long as the layer runs.
// plain_lookup: false, once the records of before have expired, stops it:
// a fresh call costs 2 again, and a record written without the key is no
// longer read (the call runs again).
func TestPlainLookupCanBeTurnedOff(t *testing.T) {
	t.Setenv(digestKeyEnv, digestKey)
	for _, tt := range []struct {
		config string
		ops    int64
		runs   int64
	}{
		{`{}`, 4, 1},
		{`{"plain_lookup": false}`, 2, 2},
	} {
		t.Run(tt.config, func(t *testing.T) {
			kv := &countingRedis{Store: storetest.Redis(t)}
			var runs atomic.Int64
			tools := map[string]runtime.ToolFunc{"unlock": func(context.Context, *runtime.ToolCall) (any, error) {
				runs.Add(1)
				return "ok", nil
			}}
			before := toolPlan(rt.Layer("idempotent", `{}`))
			before.Tools["unlock"] = plan.Tool{SideEffecting: true}
			plain := rt.Build(t, before, runtime.Deps{KV: kv, Tools: tools})
			req := runtime.ToolRequest{Name: "unlock", Args: map[string]any{"pin": "4821"}}
			_, err := plain.Tool(ctx1, req)
			require.NoError(t, err)

			keyed := toolPlan(rt.Layer("idempotent", tt.config))
			keyed.Tools["unlock"] = plan.Tool{SideEffecting: true}
			keyed.Settings.DigestKeyEnv = digestKeyEnv
			pl := rt.Build(t, keyed, runtime.Deps{KV: kv, Tools: tools})
			_, err = pl.Tool(ctx1, req)
			require.NoError(t, err)
			assert.Equal(t, tt.runs, runs.Load(), "the call of before runs again only without the plain lookup")

			n0 := kv.n.Load()
			_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "unlock", Args: map[string]any{"pin": "1234"}})
			require.NoError(t, err)
			assert.Equal(t, tt.ops, kv.n.Load()-n0, "round trips of a fresh call")
		})
	}
}
