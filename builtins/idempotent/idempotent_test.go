package idempotent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

var ctx1 = runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})

func toolPlan(chain ...plan.Layer) *plan.Plan {
	if chain == nil {
		chain = []plan.Layer{rt.Layer("idempotent", "")}
	}
	p := rt.Plan(plan.Chains{Tool: chain})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}}
	return p
}

// slowTool counts executions and takes a while, so that duplicates overlap.
type slowTool struct {
	calls atomic.Int64
	delay time.Duration
	err   error
	// started, when set, is closed once the first execution starts.
	started chan struct{}
}

func (s *slowTool) fn(ctx context.Context, c *runtime.ToolCall) (any, error) {
	n := s.calls.Add(1)
	if n == 1 && s.started != nil {
		close(s.started)
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	return map[string]any{"refund_id": "R1", "n": float64(n)}, nil
}

func TestConcurrentDuplicatesExecuteOnce(t *testing.T) {
	tool := &slowTool{delay: 20 * time.Millisecond}
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}})
	const n = 32
	results := make([]runtime.ToolResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 50.0}})
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), tool.calls.Load(), "executed exactly once")
	deduped := 0
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, map[string]any{"refund_id": "R1", "n": 1.0}, results[i].Value)
		if results[i].Deduped {
			deduped++
		}
	}
	assert.Equal(t, n-1, deduped, "every duplicate is reported deduped")

	r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 50.0, "order_id": "A1"}})
	require.NoError(t, err)
	assert.True(t, r.Deduped, "a later duplicate replays the stored result")
	assert.True(t, r.Cached)
	assert.Equal(t, int64(1), tool.calls.Load())

	ctx2 := runtime.WithRun(context.Background(), runtime.Run{ID: "run-2"})
	r, err = pl.Tool(ctx2, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 50.0, "order_id": "A1"}})
	require.NoError(t, err)
	assert.False(t, r.Deduped, "another run is another call")
	assert.Equal(t, int64(2), tool.calls.Load())
}

func TestConcurrentDuplicatesAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	p := toolPlan(rt.Layer("idempotent", `{"store": "disk"}`))
	p.Stores = map[string]plan.Store{"disk": {Kind: "sqlite", Path: path}}
	tool := &slowTool{delay: 30 * time.Millisecond}
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}}
	// Two pipelines with their own connection to one file stand for two
	// processes.
	a, b := rt.Build(t, p, deps), rt.Build(t, p, deps)
	var wg sync.WaitGroup
	var deduped atomic.Int64
	for i := range 8 {
		pl := a
		if i%2 == 1 {
			pl = b
		}
		wg.Go(func() {
			r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
			assert.NoError(t, err)
			if r.Deduped {
				deduped.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), tool.calls.Load(), "one execution across both processes")
	assert.Equal(t, int64(7), deduped.Load())
}

func TestReplaySurvivesRestart(t *testing.T) {
	p := toolPlan(rt.Layer("idempotent", `{"store": "disk"}`))
	p.Stores = map[string]plan.Store{"disk": {Kind: "sqlite", Path: filepath.Join(t.TempDir(), "state.db")}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}}
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	pl, err := runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, req)
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	pl, err = runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	defer pl.Close()
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.True(t, r.Deduped)
	assert.Equal(t, "R1", r.Value)
	assert.Equal(t, 1, tool.Calls())
}

func TestCallerKeyDedupesRedelivery(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}, IdempotencyKey: "job-7"}
	_, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	ctx2 := runtime.WithRun(context.Background(), runtime.Run{ID: "redelivered"})
	r, err := pl.Tool(ctx2, req)
	require.NoError(t, err)
	assert.True(t, r.Deduped, "the caller's key identifies the logical call")
	assert.Equal(t, []string{"job-7"}, tool.Keys())
}

func TestFailuresAreNotStoredAndShared(t *testing.T) {
	tool := &slowTool{delay: 20 * time.Millisecond, err: rt.Permanent("declined")}
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r, err := pl.Tool(ctx1, req)
			assert.Error(t, err, "concurrent duplicates share the failure")
			assert.False(t, r.Deduped)
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), tool.calls.Load())
	tool.err = nil
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.False(t, r.Deduped, "the failure was not stored: the call runs again")
	assert.Equal(t, int64(2), tool.calls.Load())
}

func TestLeaderCancellationIsNotShared(t *testing.T) {
	tool := &slowTool{delay: 50 * time.Millisecond}
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	lctx, cancel := context.WithCancel(ctx1)
	done := make(chan error, 1)
	go func() {
		_, err := pl.Tool(lctx, req)
		done <- err
	}()
	for tool.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	follower := make(chan runtime.ToolResult, 1)
	go func() {
		r, err := pl.Tool(ctx1, req)
		assert.NoError(t, err)
		follower <- r
	}()
	time.Sleep(5 * time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	r := <-follower
	assert.False(t, r.Deduped, "the follower ran the call itself")
	assert.Equal(t, int64(2), tool.calls.Load())
}

// A tool that is not retry_safe, cancelled while it ran, may have made its
// effect: its claim is ended in doubt, and a duplicate finds the call in
// doubt instead of running it again.
func TestCancelledSideEffectIsInDoubt(t *testing.T) {
	tool := &slowTool{delay: 50 * time.Millisecond}
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl":"300ms"}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	lctx, cancel := context.WithCancel(ctx1)
	done := make(chan error, 1)
	go func() {
		_, err := pl.Tool(lctx, req)
		done <- err
	}()
	for tool.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	_, err := pl.Tool(ctx1, req)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "the duplicate does not run the refund again")
	assert.Equal(t, int64(1), tool.calls.Load())
}

// A tool that is not retry_safe whose call may have run (its connection
// lost after the request was sent: runtime.MayHaveRun) keeps its claim, in
// doubt: a duplicate finds the call in doubt instead of running it again.
// So does a tool whose effects nothing declares.
func TestCallThatMayHaveRunStaysClaimed(t *testing.T) {
	for name, tools := range map[string]map[string]plan.Tool{
		"declared":   {"refund": {SideEffecting: true}},
		"undeclared": nil,
	} {
		t.Run(name, func(t *testing.T) {
			tool := &slowTool{err: runtime.MayHaveRun(rt.Transient("connection lost"))}
			p := toolPlan(rt.Layer("idempotent", `{"lease_ttl":"100ms"}`))
			p.Tools = tools
			pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.fn}})
			req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
			_, err := pl.Tool(ctx1, req)
			require.ErrorIs(t, err, runtime.ErrMayHaveRun)
			_, err = pl.Tool(ctx1, req)
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt, "the duplicate does not run the refund again")
			assert.Equal(t, int64(1), tool.calls.Load())
		})
	}
}

// brokenKV fails every operation.
type brokenKV struct{}

var errBroken = errors.New("store down")

func (brokenKV) Get(context.Context, string) ([]byte, bool, error) { return nil, false, errBroken }
func (brokenKV) Set(context.Context, string, []byte, time.Duration) error {
	return errBroken
}
func (brokenKV) SetIfAbsent(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, errBroken
}
func (brokenKV) Delete(context.Context, string) error { return errBroken }

func TestStoreFailureFailsClosed(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(), runtime.Deps{KV: brokenKV{}, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.Error(t, err)
	assert.Equal(t, "idempotent", runtime.LayerOf(err))
	assert.ErrorIs(t, err, errBroken)
	assert.Equal(t, 0, tool.Calls(), "the call did not run")
}

func TestWaitsForAClaimHeldElsewhere(t *testing.T) {
	kv := runtime.NewMemoryKV()
	tool := rt.NewTool(rt.ToolResult{Value: "mine"})
	pl := rt.Build(t, toolPlan(), runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	// Another process claimed the call and stores its result while this
	// one waits.
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	key := claimKey(req)
	stored := []byte(`{"state":"done","result":"theirs"}`)
	ok, err := kv.SetIfAbsent(context.Background(), key, pendingClaim(), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = kv.Set(context.Background(), key, stored, time.Hour)
	}()
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.True(t, r.Deduped)
	assert.Equal(t, "theirs", r.Value, "the other process's result is replayed")
	assert.Equal(t, 0, tool.Calls())

	// A claim that disappears (the other call failed) is taken over.
	req2 := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A2"}}
	key2 := claimKey(req2)
	ok, err = kv.SetIfAbsent(context.Background(), key2, pendingClaim(), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = kv.Delete(context.Background(), key2)
	}()
	r, err = pl.Tool(ctx1, req2)
	require.NoError(t, err)
	assert.False(t, r.Deduped)
	assert.Equal(t, 1, tool.Calls())

	// A waiter gives up when its context ends.
	req3 := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A3"}}
	_, err = kv.SetIfAbsent(context.Background(), claimKey(req3), pendingClaim(), time.Minute)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx1, 20*time.Millisecond)
	defer cancel()
	_, err = pl.Tool(cctx, req3)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1, tool.Calls())
}

// pendingClaim is another process's live claim, as the KV lease stores it.
func pendingClaim() []byte {
	return []byte(fmt.Sprintf(`{"state":"pending","token":1,"until":%d}`, time.Now().Add(time.Minute).UnixNano()))
}

// claimKey returns the store key of req in run-1.
func claimKey(req runtime.ToolRequest) string {
	return idempotent.Key(&runtime.ToolCall{Name: req.Name, Args: req.Args,
		Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}, IdempotencyKey: req.IdempotencyKey}})
}

func TestLeaderPanicIsNotShared(t *testing.T) {
	var calls atomic.Int64
	started := make(chan struct{})
	release := make(chan struct{})
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-release
			panic("bug")
		}
		return "R2", nil
	}
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	go func() {
		defer func() { _ = recover() }()
		_, _ = pl.Tool(ctx1, req)
	}()
	<-started
	follower := make(chan runtime.ToolResult, 1)
	go func() {
		r, err := pl.Tool(ctx1, req)
		assert.NoError(t, err)
		follower <- r
	}()
	time.Sleep(5 * time.Millisecond)
	close(release)
	r := <-follower
	assert.Equal(t, "R2", r.Value, "the follower ran the call itself")
	assert.False(t, r.Deduped)
	assert.Equal(t, int64(2), calls.Load())
}

// A read-only tool passes through; an undeclared one, whose effects are
// unknown, is taken as side-effecting: a duplicate replays its result.
func TestReadOnlyToolsPassThroughAndUndeclaredOnesAreDeduped(t *testing.T) {
	p := toolPlan()
	p.Tools["job_status"] = plan.Tool{}
	status := rt.NewTool(rt.ToolResult{Value: "running"}, rt.ToolResult{Value: "done"})
	other := rt.NewTool(rt.ToolResult{Value: 1}, rt.ToolResult{Value: 2})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"job_status": status.Func(), "undeclared": other.Func()}})
	for _, tt := range []struct {
		name    string
		tool    *rt.Tool
		want    []any
		deduped bool
		calls   int
	}{
		{"job_status", status, []any{"running", "done"}, false, 2},
		{"undeclared", other, []any{1, float64(1)}, true, 1},
	} {
		req := runtime.ToolRequest{Name: tt.name, Args: map[string]any{"job": "j1"}}
		for i, want := range tt.want {
			r, err := pl.Tool(ctx1, req)
			require.NoError(t, err)
			assert.Equal(t, want, r.Value, tt.name)
			assert.Equal(t, tt.deduped && i > 0, r.Deduped, tt.name)
		}
		assert.Equal(t, tt.calls, tt.tool.Calls(), tt.name)
	}
}

func TestArgumentsWithoutCanonicalFormAreRefused(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "paid"})
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	for _, to := range []string{"alice", "bob"} {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"to": to, "amount": math.Inf(1)}})
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Equal(t, "idempotent", ce.Layer)
		assert.ErrorContains(t, err, "arguments cannot be canonicalised")
		assert.False(t, r.Deduped)
	}
	assert.Equal(t, 0, tool.Calls(), "the call did not run")
}

func TestKeyArgsDedupeAcrossRunsWithinATenant(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`)),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	call := func(run, tenant string, args map[string]any) (runtime.ToolResult, error) {
		return pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: tenant}),
			runtime.ToolRequest{Name: "refund", Args: args})
	}
	_, err := call("run-1", "acme", map[string]any{"order_id": "A1", "note": "first"})
	require.NoError(t, err)
	r, err := call("run-2", "acme", map[string]any{"order_id": "A1", "note": "first"})
	require.NoError(t, err)
	assert.True(t, r.Deduped, "same order, same tenant, another run: deduped")
	assert.Equal(t, 1, tool.Calls())
	_, err = call("run-2", "acme", map[string]any{"order_id": "A1", "note": "second"})
	var blocked *runtime.BlockedError
	require.ErrorAs(t, err, &blocked, "same order with other arguments: refused")
	assert.Equal(t, 1, tool.Calls())
	r, err = call("run-2", "globex", map[string]any{"order_id": "A1"})
	require.NoError(t, err)
	assert.False(t, r.Deduped, "another tenant never shares a result")
	assert.Equal(t, 2, tool.Calls())

	_, err = call("run-3", "acme", map[string]any{"note": "no order"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `argument "order_id" named in key_args is missing or null`)
	assert.Equal(t, 2, tool.Calls(), "refused without running")
}

func TestKeyArgsNullReadsAsMissing(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`)),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1", Tenant: "acme"})
	for _, amount := range []int{50, 900} {
		r, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": nil, "amount": amount}})
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce, "a null key argument keys nothing: refused, never one key shared by every null call")
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Contains(t, err.Error(), `argument "order_id" named in key_args is missing or null`)
		assert.True(t, runtime.DidNotRun(err), "the refusal proves the call did not run")
		assert.False(t, r.Deduped)
	}
	assert.Equal(t, 0, tool.Calls(), "neither refund ran")
}

func TestTenantsDoNotShareResults(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	for _, tenant := range []string{"acme", "globex", "acme"} {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "run-1", Tenant: tenant}), req)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, tool.Calls())
}

func TestAnExpiredClaimIsInDoubt(t *testing.T) {
	kv := runtime.NewMemoryKV()
	p := toolPlan()
	p.Tools["charge"] = plan.Tool{SideEffecting: true}
	var keys []string
	charge := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		keys = append(keys, c.IdempotencyKey())
		return "charged", nil
	}
	refund := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		keys = append(keys, c.IdempotencyKey())
		return "refunded", nil
	}
	pl := rt.Build(t, p, runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"refund": refund, "charge": charge}})
	// A process claimed both calls and died: its leases have expired.
	dead := []byte(fmt.Sprintf(`{"state":"pending","token":1,"until":%d}`, time.Now().Add(-time.Second).UnixNano()))
	chargeReq := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}
	refundReq := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	for _, req := range []runtime.ToolRequest{chargeReq, refundReq} {
		require.NoError(t, kv.Set(context.Background(), claimKey(req), dead, time.Hour))
	}

	_, err := pl.Tool(ctx1, chargeReq)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.True(t, runtime.Classify(err).Final())
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
	assert.False(t, runtime.IsTransient(err))
	assert.Empty(t, keys, "a tool that is not retry_safe does not run again")
	_, err = pl.Tool(ctx1, chargeReq)
	require.ErrorAs(t, err, &doubt, "the call stays in doubt")

	r, err := pl.Tool(ctx1, refundReq)
	require.NoError(t, err)
	assert.Equal(t, "refunded", r.Value, "a retry_safe tool runs again")
	require.Len(t, keys, 1)
	assert.Equal(t, (&runtime.ToolCall{Name: "refund", Args: refundReq.Args, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}).IdempotencyKey(),
		keys[0], "with the idempotency key of the first execution")
	r, err = pl.Tool(ctx1, refundReq)
	require.NoError(t, err)
	assert.True(t, r.Deduped, "and its result is published")
}

// TestCallLongerThanTTLRunsOnce runs a call longer than ttl on one replica
// and its duplicate on another while it runs, over every shared store: the
// claim lives as long as its lease, so the duplicate waits for the result
// instead of claiming the key again, whether the lease is renewed before
// it ends (lease_ttl 1.5s, the call taking 2s) or not (10s). The margins are
// wide so that a loaded machine cannot fail it: the lease is renewed every
// 500ms, a second before it would end, and the result outlives the
// duplicate's longest poll (200ms) by 800ms.
func TestCallLongerThanTTLRunsOnce(t *testing.T) {
	for _, st := range storetest.SharedStores(t) {
		for _, leaseTTL := range []string{"1500ms", "10s"} {
			t.Run(st.Name+"/lease_ttl="+leaseTTL, func(t *testing.T) {
				t.Parallel()
				tool := &slowTool{delay: 2 * time.Second, started: make(chan struct{})}
				p := toolPlan(rt.Layer("idempotent", `{"ttl": "1s", "lease_ttl": "`+leaseTTL+`"}`))
				deps := runtime.Deps{KV: st.KV, Tools: map[string]runtime.ToolFunc{"refund": tool.fn}}
				a, b := rt.Build(t, p, deps), rt.Build(t, p, deps)
				req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": t.Name()}}
				_, rb := rt.Staggered(t, ctx1, a, b, req, tool.started, 1200*time.Millisecond) // b calls past ttl, while a runs
				assert.Equal(t, int64(1), tool.calls.Load(), "one execution across both replicas")
				assert.True(t, rb.Deduped, "the duplicate replays the first call's result")
			})
		}
	}
}

// TestPanicLeavesASideEffectingCallInDoubt: a tool that panics may have made
// its effect before it did, as one whose process crashed: a duplicate of a
// tool that is not retry_safe finds the call in doubt instead of running it
// again.
func TestPanicLeavesASideEffectingCallInDoubt(t *testing.T) {
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl":"60ms"}`))
	p.Tools["charge"] = plan.Tool{SideEffecting: true}
	var calls atomic.Int64
	charge := func(context.Context, *runtime.ToolCall) (any, error) {
		if calls.Add(1) == 1 {
			panic("charged, then crashed decoding the answer")
		}
		return "charged", nil
	}
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"charge": charge}})
	req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}
	assert.Panics(t, func() { _, _ = pl.Tool(ctx1, req) })
	_, err := pl.Tool(ctx1, req)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, int64(1), calls.Load(), "the charge did not run again")
}

// TestKeyArgsKeyPassedDownstreamUnderAnAudit: with key_args the tool gets the
// layer's key, the same in every run, even when a layer outside (an audit)
// read the call's idempotency key first: a refund that failed in one run and
// is made again from another reaches the payment provider under one key.
func TestKeyArgsKeyPassedDownstreamUnderAnAudit(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("timeout")}, rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", `{"key_args": ["order_id"]}`)),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	for _, run := range []string{"run-1", "run-2"} {
		_, _ = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}),
			runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	}
	require.Len(t, tool.Keys(), 2)
	assert.Equal(t, tool.Keys()[0], tool.Keys()[1], "one key downstream across runs")

	// A key the caller supplied is still the one passed downstream.
	tool = rt.NewTool(rt.ToolResult{Value: "R1"})
	pl = rt.Build(t, toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", `{"key_args": ["order_id"]}`)),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}, IdempotencyKey: "job-7"})
	require.NoError(t, err)
	assert.Equal(t, []string{"job-7"}, tool.Keys())
}

// TestRanErrorIsStored: a call that ran but whose result is unusable (an
// error marked runtime.Ran) is stored as its outcome: a duplicate gets the
// error, deduped, without running the tool again, in this process and in
// another one sharing the store.
func TestRanErrorIsStored(t *testing.T) {
	prefix := fmt.Sprintf("agentc_ran_%d", time.Now().UnixNano())
	for _, tc := range []struct {
		kind, env string
	}{{"sqlite", ""}, {"redis", "AGENTC_TEST_REDIS_URL"}, {"postgres", "AGENTC_TEST_POSTGRES_URL"}} {
		t.Run(tc.kind, func(t *testing.T) {
			st := plan.Store{Kind: tc.kind, Path: filepath.Join(t.TempDir(), "state.db")}
			if tc.env != "" {
				st = plan.Store{Kind: tc.kind, URL: os.Getenv(tc.env), Prefix: prefix}
				if st.URL == "" {
					t.Skip(tc.env + " is not set")
				}
			}
			testRanErrorIsStored(t, st)
		})
	}
}

func testRanErrorIsStored(t *testing.T, st plan.Store) {
	p := toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", `{"store": "shared"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	p.Stores = map[string]plan.Store{"shared": st}
	var calls atomic.Int64
	audit := &runtime.MemoryAudit{}
	deps := runtime.Deps{Audit: audit, Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
		calls.Add(1)
		return nil, runtime.Ran(rt.Permanent("refunded, but the receipt is too large"))
	}}}
	a, b := rt.Build(t, p, deps), rt.Build(t, p, deps)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := a.Tool(ctx1, req)
	require.ErrorIs(t, err, runtime.ErrRan)
	assert.False(t, runtime.IsTransient(err), "a call that ran is not tried again")
	for _, pl := range []*runtime.Pipeline{a, b} {
		r, err := pl.Tool(ctx1, req)
		require.ErrorIs(t, err, runtime.ErrRan)
		assert.ErrorContains(t, err, "the call ran earlier but its result could not be used")
		assert.ErrorContains(t, err, "refunded, but the receipt is too large")
		assert.Equal(t, runtime.KindPermanent, runtime.ErrorKind(runtime.KindOf(err)))
		assert.True(t, r.Deduped)
	}
	assert.EqualValues(t, 1, calls.Load(), "the tool ran once")
	var got []runtime.AuditDecision
	for _, r := range audit.Records() {
		if r.Phase == runtime.PhaseOutcome {
			got = append(got, r.Decision)
		}
	}
	assert.Equal(t, []runtime.AuditDecision{runtime.DecisionRan, runtime.DecisionDeduped, runtime.DecisionDeduped}, got)
}

// TestUnencodableResultIsNotRunAgain: a result that does not encode as
// JSON is returned to its caller; a duplicate cannot replay it and gets an
// error instead of running the tool again.
func TestUnencodableResultIsNotRunAgain(t *testing.T) {
	p := toolPlan()
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	var calls atomic.Int64
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
		calls.Add(1)
		return map[string]any{"done": make(chan int)}, nil
	}}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err, "the caller gets its result")
	assert.Contains(t, r.Value, "done")
	r, err = pl.Tool(ctx1, req)
	require.ErrorIs(t, err, runtime.ErrRan)
	assert.ErrorContains(t, err, "the result does not encode as JSON")
	assert.True(t, r.Deduped)
	assert.EqualValues(t, 1, calls.Load(), "the tool ran once")
}

// TestResultBlockedInsideIsNotRunAgain: an after-phase guard inside
// idempotent (where vet lets it sit) blocks the result of a call that ran:
// a duplicate gets the block, classified blocked, without running the tool
// again.
func TestResultBlockedInsideIsNotRunAgain(t *testing.T) {
	p := toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", ""),
		rt.Named("receipt", rt.Layer("guard", `{"require":"result.status == 'ok'","phase":"after","message":"the refund's receipt is not ok"}`)))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	var calls atomic.Int64
	audit := &runtime.MemoryAudit{}
	pl := rt.Build(t, p, runtime.Deps{Audit: audit, Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
		calls.Add(1)
		return map[string]any{"status": "partial"}, nil
	}}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	for i := range 2 {
		r, err := pl.Tool(ctx1, req)
		require.ErrorIs(t, err, runtime.ErrRan, "call %d", i)
		assert.ErrorContains(t, err, "blocked by receipt: the refund's receipt is not ok")
		assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
		assert.Equal(t, "receipt", runtime.LayerOf(err))
		assert.Equal(t, i == 1, r.Deduped)
	}
	assert.EqualValues(t, 1, calls.Load(), "the tool ran once")
	var got []runtime.AuditDecision
	for _, r := range audit.Records() {
		if r.Phase == runtime.PhaseOutcome {
			got = append(got, r.Decision)
		}
	}
	assert.Equal(t, []runtime.AuditDecision{runtime.DecisionRan, runtime.DecisionDeduped}, got)
}

// TestResultLikeAStoredErrorIsReplayed: a result shaped like a stored error
// is replayed as the result it is.
func TestResultLikeAStoredErrorIsReplayed(t *testing.T) {
	want := map[string]any{"!ran": map[string]any{"message": "not an error"}}
	tool := rt.NewTool(rt.ToolResult{Value: want})
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	for range 2 {
		r, err := pl.Tool(ctx1, req)
		require.NoError(t, err)
		assert.Equal(t, want, r.Value)
	}
	assert.Equal(t, 1, tool.Calls())
}

// outcomeFailingSink refuses every outcome record: the call runs, its
// audit layer cannot say so.
type outcomeFailingSink struct{ intents atomic.Int64 }

func (s *outcomeFailingSink) Append(_ context.Context, r runtime.AuditRecord) error {
	if r.Phase == runtime.PhaseOutcome {
		return errors.New("disk full")
	}
	s.intents.Add(1)
	return nil
}

// A call that ran but whose audit outcome could not be written (an audit
// inside the idempotent layer) keeps its claim, in doubt: a duplicate is in
// doubt at once (its lease_ttl is an hour), never a second execution.
func TestCallWhoseOutcomeWasNotRecordedStaysClaimed(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Value: "R2"})
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl":"1h"}`), rt.Layer("audit", ""))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	sink := &outcomeFailingSink{}
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	dctx, cancel := context.WithTimeout(ctx1, 5*time.Second)
	defer cancel()
	_, err = pl.Tool(dctx, req)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "the duplicate does not run the refund again")
	assert.Equal(t, 1, tool.Calls())
	assert.Positive(t, sink.intents.Load())
}
