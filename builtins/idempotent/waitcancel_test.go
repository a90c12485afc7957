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
)

// sleepSignal is the real clock, telling each of its sleeps on sleeping.
type sleepSignal struct {
	runtime.RealClock
	sleeping chan struct{}
}

func (s sleepSignal) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case s.sleeping <- struct{}{}:
	default:
	}
	return s.RealClock.Sleep(ctx, d)
}

// intentSignal is a memory trail telling on intents each intent it records.
type intentSignal struct {
	*runtime.MemoryAudit
	intents chan struct{}
}

func (s intentSignal) Append(ctx context.Context, r runtime.AuditRecord) error {
	err := s.MemoryAudit.Append(ctx, r)
	if r.Phase == runtime.PhaseIntent {
		s.intents <- struct{}{}
	}
	return err
}

// waitPlan is the tool chain docs/state.md shows, a meter and an audit
// outside the layer, over a side-effecting tool that is not retry_safe.
func waitPlan() *plan.Plan {
	p := toolPlan(rt.Layer("meter", `{"budget":{"calls":5},"scope":"global"}`), rt.Layer("audit", ""), rt.Layer("idempotent", ""))
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}}
	return p
}

// assertNotRun checks that a duplicate that only waited for another call's
// claim and was cancelled says it did not run, is audited so and is not
// charged: the meter charged only the calls in want.
func assertNotRun(t *testing.T, err error, pl *runtime.Pipeline, sink *runtime.MemoryAudit, charged int64) {
	t.Helper()
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, runtime.DidNotRun(err), "the duplicate never reached the tool: %v", err)
	var outcomes int
	for _, r := range sink.Records() {
		if r.Phase == runtime.PhaseOutcome {
			outcomes++
			assert.NotEqual(t, runtime.DecisionInDoubt, r.Decision, "%s: %s", r.ErrorType, r.ErrorMessage)
		}
	}
	assert.Positive(t, outcomes)
	l := pl.Layers(plan.StageTool)[0].Middleware.(runtime.LedgerReader).Ledger("")
	assert.Equal(t, charged, l.Calls, "the meter charges only calls that ran")
}

// callAsync calls req on pl under ctx, its error sent on the channel.
func callAsync(ctx context.Context, pl *runtime.Pipeline, req runtime.ToolRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := pl.Tool(ctx, req)
		done <- err
	}()
	return done
}

// TestAWaitingDuplicateCancelledDidNotRun: a duplicate waiting for a claim
// another process holds, then cancelled (its client gone, the server
// shutting down), never started the tool: it fails as not run, its audit
// outcome is not in doubt, and the meter does not charge it.
func TestAWaitingDuplicateCancelledDidNotRun(t *testing.T) {
	kv := runtime.NewMemoryKV()
	sink := &runtime.MemoryAudit{}
	clock := sleepSignal{sleeping: make(chan struct{}, 1)}
	tool := rt.NewTool(rt.ToolResult{Value: "paid"})
	pl := rt.Build(t, waitPlan(), runtime.Deps{KV: kv, Audit: sink, Clock: clock,
		Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
	req := runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "C"}}
	ok, err := kv.SetIfAbsent(context.Background(), claimKey(req), pendingClaim(), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	ctx, cancel := context.WithCancel(ctx1)
	defer cancel()
	done := callAsync(ctx, pl, req)
	select {
	case <-clock.sleeping: // it waits for the claim held elsewhere
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate did not wait for the claim")
	}
	cancel()
	assertNotRun(t, <-done, pl, sink, 0)
	assert.Equal(t, 0, tool.Calls())
}

// TestADuplicateWaitingInThisProcessCancelledDidNotRun: a duplicate waiting
// for the same call running in this process, then cancelled, never started
// the tool either; the call it waited for runs once and is charged once.
func TestADuplicateWaitingInThisProcessCancelledDidNotRun(t *testing.T) {
	sink := intentSignal{MemoryAudit: &runtime.MemoryAudit{}, intents: make(chan struct{}, 2)}
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	pay := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		calls.Add(1)
		close(started)
		<-release
		return "paid", nil
	}
	pl := rt.Build(t, waitPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"pay": pay}})
	req := runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "C"}}

	led := callAsync(ctx1, pl, req)
	<-sink.intents
	<-started
	ctx, cancel := context.WithCancel(ctx1)
	defer cancel()
	done := callAsync(ctx, pl, req)
	<-sink.intents // past the meter and the audit, on its way to the flight
	cancel()
	err := <-done
	close(release)
	require.NoError(t, <-led)
	assertNotRun(t, err, pl, sink.MemoryAudit, 1)
	assert.Equal(t, int64(1), calls.Load())
}
