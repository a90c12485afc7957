package memoize_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// slowTool counts its executions and answers after delay with a result
// naming the execution; the first fail executions fail.
type slowTool struct {
	delay time.Duration
	fail  int64
	n     atomic.Int64
	// started, when set, is closed once the first execution starts.
	started chan struct{}
}

func (s *slowTool) run(ctx context.Context, _ *runtime.ToolCall) (any, error) {
	n := s.n.Add(1)
	if n == 1 && s.started != nil {
		close(s.started)
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if n <= s.fail {
		return nil, rt.Transient("upstream down")
	}
	return fmt.Sprintf("result %d", n), nil
}

const flightConfig = `{"scope": "global", "single_flight": true, "lease_ttl": "150ms"}`

func TestSingleFlightCollapsesConcurrentMisses(t *testing.T) {
	tool := &slowTool{delay: 50 * time.Millisecond}
	pl := rt.Build(t, toolPlan(flightConfig), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": tool.run}})
	var wg sync.WaitGroup
	results := make([]runtime.ToolResult, 16)
	for i := range results {
		wg.Go(func() {
			r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
			assert.NoError(t, err)
			results[i] = r
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), tool.n.Load(), "one execution for 16 concurrent identical calls")
	cached := 0
	for _, r := range results {
		assert.Equal(t, "result 1", r.Value)
		if r.Cached {
			cached++
		}
	}
	assert.Equal(t, 15, cached, "every call but the leader's is served the shared result")

	r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
	require.NoError(t, err)
	assert.True(t, r.Cached, "the result stays cached")
	assert.Equal(t, int64(1), tool.n.Load())
}

// twoReplicas builds two pipelines (two processes, as far as their layers
// know) over one store.
func twoReplicas(t *testing.T, kv runtime.KV, tool runtime.ToolFunc) (a, b *runtime.Pipeline) {
	deps := runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"search": tool}}
	return rt.Build(t, toolPlan(flightConfig), deps), rt.Build(t, toolPlan(flightConfig), deps)
}

func TestSingleFlightAcrossPipelinesSharingAStore(t *testing.T) {
	tool := &slowTool{delay: 80 * time.Millisecond}
	a, b := twoReplicas(t, runtime.NewMemoryKV(), tool.run)
	var wg sync.WaitGroup
	for i := range 8 {
		pl := a
		if i%2 == 1 {
			pl = b
		}
		wg.Go(func() {
			r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
			if assert.NoError(t, err) {
				assert.Equal(t, "result 1", r.Value)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), tool.n.Load())
}

func TestSingleFlightWaiterRunsWhenTheLeaderFails(t *testing.T) {
	tool := &slowTool{delay: 60 * time.Millisecond, fail: 1}
	a, b := twoReplicas(t, runtime.NewMemoryKV(), tool.run)
	errA := make(chan error, 1)
	go func() {
		_, err := a.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
		errA <- err
	}()
	time.Sleep(20 * time.Millisecond) // a leads
	r, err := b.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
	require.NoError(t, err)
	assert.Equal(t, "result 2", r.Value, "the waiter ran the call after the leader's failure")
	assert.False(t, r.Cached)
	assert.ErrorContains(t, <-errA, "upstream down")
	assert.Equal(t, int64(2), tool.n.Load())
}

// deafLeaser is a lease store that cannot renew: a leader's claim expires
// while its call runs, as a dead leader's does.
type deafLeaser struct {
	runtime.KV
	*runtime.KVLeaser
}

func newDeafLeaser() deafLeaser {
	kv := runtime.NewMemoryKV()
	return deafLeaser{KV: kv, KVLeaser: runtime.NewKVLeaser(kv)}
}

func (deafLeaser) Renew(context.Context, string, int64, time.Duration) (bool, error) {
	return false, errors.New("store unreachable")
}

func TestSingleFlightWaiterTakesOverAnExpiredLease(t *testing.T) {
	tool := &slowTool{delay: 700 * time.Millisecond}
	a, b := twoReplicas(t, newDeafLeaser(), tool.run)
	go func() { _, _ = a.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}}) }()
	time.Sleep(30 * time.Millisecond) // a leads, and stops renewing
	start := time.Now()
	r, err := b.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
	require.NoError(t, err)
	waited := time.Since(start)
	assert.Equal(t, "result 2", r.Value, "the waiter ran the call itself")
	assert.Less(t, waited, 1400*time.Millisecond, "it waited for the lease (150ms), not for the leader's call")
	assert.GreaterOrEqual(t, waited, 100*time.Millisecond, "it waited for the lease to expire first")
}

func TestSingleFlightChat(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hel", "lo"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}, Delay: 50 * time.Millisecond})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", flightConfig)}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var wg sync.WaitGroup
	var cached atomic.Int64
	for range 8 {
		wg.Go(func() {
			text, resp, err := rt.Collect(ctx1, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
			if assert.NoError(t, err) {
				assert.Equal(t, "hello", text)
				assert.Equal(t, int64(2), resp.Usage.OutputTokens)
			}
			if resp.Cached {
				cached.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, model.Calls(), "one model call for 8 concurrent identical requests")
	assert.Equal(t, int64(7), cached.Load())
}

// TestSingleFlightLeaderOutlivesTTL runs a leader longer than the entry's
// ttl on one replica and the same call on another while it runs, over
// every shared store: the claim lives as long as its lease, so the second
// replica waits for the leader's result instead of running the call again,
// whether the lease is renewed before ttl ends (lease_ttl 600ms) or not
// (5s).
func TestSingleFlightLeaderOutlivesTTL(t *testing.T) {
	for _, st := range storetest.SharedStores(t) {
		for _, leaseTTL := range []string{"600ms", "5s"} {
			t.Run(st.Name+"/lease_ttl="+leaseTTL, func(t *testing.T) {
				// The result lives longer than the waiter's longest poll
				// (200ms), so it cannot expire unseen.
				tool := &slowTool{delay: 800 * time.Millisecond, started: make(chan struct{})}
				cfg := `{"scope": "global", "single_flight": true, "ttl": "300ms", "lease_ttl": "` + leaseTTL + `"}`
				deps := runtime.Deps{KV: st.KV, Tools: map[string]runtime.ToolFunc{"search": tool.run}}
				a, b := rt.Build(t, toolPlan(cfg), deps), rt.Build(t, toolPlan(cfg), deps)
				req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": t.Name()}}
				ra, rb := rt.Staggered(t, ctx1, a, b, req, tool.started, 400*time.Millisecond) // b calls past ttl, while a runs
				assert.Equal(t, int64(1), tool.n.Load(), "one execution across both replicas")
				assert.Equal(t, "result 1", ra.Value)
				assert.Equal(t, "result 1", rb.Value, "the second replica shares the leader's result")
			})
		}
	}
}
