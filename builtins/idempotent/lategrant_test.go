package idempotent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// slowGrantLeaser is a store whose grant of a claim arrives late, while
// slow is set: the store answers after delay.
type slowGrantLeaser struct {
	runtime.KV
	*runtime.KVLeaser
	delay time.Duration
	slow  *atomic.Bool
}

func (l slowGrantLeaser) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	g, err := l.KVLeaser.AcquireAs(ctx, key, owner, note, lease, keep, takeover)
	if l.slow.Load() {
		time.Sleep(l.delay) // the store's answer is late, not a synchronisation
	}
	return g, err
}

// A claim granted after its lease may already have lapsed (the store
// answered after lease_ttl) does not start the tool under an ended context
// and then hold the call in doubt: it is released and the call refused as
// not run (store unavailable), so that a duplicate runs it.
func TestAClaimGrantedLateIsReleasedNotRun(t *testing.T) {
	kv := runtime.NewMemoryKV()
	var slow atomic.Bool
	slow.Store(true)
	l := slowGrantLeaser{KV: kv, KVLeaser: runtime.NewKVLeaser(kv), delay: 40 * time.Millisecond, slow: &slow}
	var ran, started atomic.Int64
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		started.Add(1)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ran.Add(1)
		return "ok", nil
	}
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl": "30ms"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: l, Tools: map[string]runtime.ToolFunc{"refund": tool}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}

	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	assert.True(t, runtime.DidNotRun(err), "not run: %v", err)
	assert.ErrorIs(t, err, runtime.ErrStoreUnavailable)
	assert.True(t, errors.Is(err, lease.ErrLapsed), "%v", err)
	assert.Zero(t, started.Load(), "the tool is not started under an ended context")

	slow.Store(false)
	res, err := pl.Tool(ctx1, req)
	require.NoError(t, err, "the duplicate is not refused in doubt")
	assert.Equal(t, "ok", res.Value)
	assert.EqualValues(t, 1, ran.Load())
}
