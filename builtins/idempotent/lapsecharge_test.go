package idempotent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A retry_safe call stopped as its claim could not be kept had run (its
// tool had the call) but failed as a store refusal marked not run: a meter
// outside did not charge it, and a calls ceiling let such calls make
// effects without end. Its error says it may have run, and the meter
// charges it; its claim is in doubt, and a duplicate of the retry_safe
// tool takes it over and runs under the same idempotency key.
func TestAStoppedRetrySafeCallIsChargedAsOneThatMayHaveRun(t *testing.T) {
	leaser := newStallingLeaser(t)
	var calls atomic.Int64
	var keys []string
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		keys = append(keys, c.IdempotencyKey())
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return "refunded", nil
	}
	p := toolPlan(rt.Layer("meter", `{"budget":{"calls":100},"scope":"run"}`), rt.Layer("idempotent", `{"lease_ttl": "300ms"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true, RetrySafe: true}
	pl := rt.Build(t, p, runtime.Deps{KV: leaser, Tools: map[string]runtime.ToolFunc{"refund": tool}})
	m := toolMeter(t, pl)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	assert.ErrorIs(t, err, lease.ErrLapsed)
	assert.False(t, runtime.DidNotRun(err), "the stopped call may have run: %v", err)
	assert.ErrorIs(t, err, runtime.ErrMayHaveRun)
	assert.Equal(t, int64(1), m.Ledger("run-1").Calls, "the meter charges the call that may have run")

	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.Equal(t, "refunded", r.Value)
	assert.EqualValues(t, 2, calls.Load())
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "the retry runs under the same idempotency key")
}

// A duplicate refused in doubt by the idempotent layer (an earlier
// execution's claim is in doubt) never reached its tool: a meter outside
// charges the execution that may have run, not the refusal.
func TestADuplicateRefusedInDoubtIsNotCharged(t *testing.T) {
	leaser := newStallingLeaser(t)
	var calls atomic.Int64
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := toolPlan(rt.Layer("meter", `{"budget":{"calls":100},"scope":"run"}`), rt.Layer("idempotent", `{"lease_ttl": "300ms"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: leaser, Tools: map[string]runtime.ToolFunc{"refund": tool}})
	m := toolMeter(t, pl)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	assert.False(t, runtime.DidNotRun(err), "the stopped call may have run: %v", err)
	assert.Equal(t, int64(1), m.Ledger("run-1").Calls, "the meter charges the call that may have run")

	_, err = pl.Tool(ctx1, req)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.EqualValues(t, 1, calls.Load(), "the duplicate did not run")
	assert.Equal(t, int64(1), m.Ledger("run-1").Calls, "the duplicate refused in doubt is not charged")
}

// toolMeter returns the meter of pl's tool chain.
func toolMeter(t *testing.T, pl *runtime.Pipeline) *meter.Meter {
	t.Helper()
	for _, l := range pl.Layers(plan.StageTool) {
		if m, ok := l.Middleware.(*meter.Meter); ok {
			return m
		}
	}
	require.FailNow(t, "no meter in the tool chain")
	return nil
}
