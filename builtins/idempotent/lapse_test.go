package idempotent_test

import (
	"context"
	"sync"
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

// stallingLeaser is a store whose renewals hang until they are given up
// (or the test ends): a holder's lease lapses while its call runs.
type stallingLeaser struct {
	runtime.KV
	*runtime.KVLeaser
	ended chan struct{}
}

func newStallingLeaser(t *testing.T) stallingLeaser {
	kv := runtime.NewMemoryKV()
	l := stallingLeaser{KV: kv, KVLeaser: runtime.NewKVLeaser(kv), ended: make(chan struct{})}
	t.Cleanup(func() { close(l.ended) })
	return l
}

func (l stallingLeaser) Renew(ctx context.Context, _ string, _ int64, _ time.Duration) (bool, error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-l.ended:
		return false, context.Canceled
	}
}

// A holder whose renewals stall past its lease stops its call before the
// lease can lapse: a duplicate in another replica that takes the claim over
// (a retry_safe tool) never runs while the holder's call still runs, and
// the holder's outcome is not stored over the duplicate's.
func TestAHolderWhoseLeaseLapsesStopsBeforeADuplicateRuns(t *testing.T) {
	leaser := newStallingLeaser(t)
	var mu sync.Mutex
	var holderCtx context.Context
	holding := make(chan struct{})
	release := make(chan struct{})
	var holderLive []bool
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		mu.Lock()
		if holderCtx == nil {
			holderCtx = ctx
			mu.Unlock()
			close(holding)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return "holder", nil
			}
		}
		holderLive = append(holderLive, holderCtx.Err() == nil)
		mu.Unlock()
		return "duplicate", nil
	}
	cfg := `{"lease_ttl": "600ms"}`
	deps := runtime.Deps{KV: leaser, Tools: map[string]runtime.ToolFunc{"refund": tool}}
	a, b := rt.Build(t, toolPlan(rt.Layer("idempotent", cfg)), deps), rt.Build(t, toolPlan(rt.Layer("idempotent", cfg)), deps)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	holderErr := make(chan error, 1)
	go func() {
		_, err := a.Tool(ctx1, req)
		holderErr <- err
	}()
	<-holding
	r, err := b.Tool(ctx1, req)
	require.NoError(t, err)
	assert.Equal(t, "duplicate", r.Value, "the duplicate ran once the lease lapsed")
	close(release)
	mu.Lock()
	assert.Equal(t, []bool{false}, holderLive, "the holder's call had been stopped when the duplicate ran")
	mu.Unlock()
	select {
	case err := <-holderErr:
		require.Error(t, err, "the holder's call was stopped")
		assert.ErrorContains(t, err, "lease_ttl")
	case <-time.After(time.Minute):
		t.Fatal("the holder did not return")
	}
	r, err = b.Tool(ctx1, req)
	require.NoError(t, err)
	assert.True(t, r.Deduped)
	assert.Equal(t, "duplicate", r.Value, "the duplicate's outcome is the one stored")
}

// A holder of a tool that is not retry_safe, stopped as its lease could
// not be renewed, fails in doubt and ends its claim in doubt: the tool may
// have run, and a duplicate is refused at once.
func TestAHolderWhoseLeaseLapsesEndsItsClaimInDoubt(t *testing.T) {
	leaser := newStallingLeaser(t)
	var calls atomic.Int64
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl": "300ms"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: leaser, Tools: map[string]runtime.ToolFunc{"refund": tool}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "the stopped call may have run: %v", err)
	assert.ErrorIs(t, err, lease.ErrLapsed)
	_, err = pl.Tool(ctx1, req)
	var d *runtime.InDoubtError
	require.ErrorAs(t, err, &d, "the claim was ended in doubt at once")
	assert.EqualValues(t, 1, calls.Load())
}
