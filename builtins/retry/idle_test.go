package retry_test

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/contentfilter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// result is what a call run by inBackground returned.
type result struct {
	resp runtime.ChatResponse
	err  error
}

// inBackground runs call on its own goroutine and returns where its result
// arrives.
func inBackground(call func() (runtime.ChatResponse, error)) <-chan result {
	done := make(chan result, 1)
	go func() {
		resp, err := call()
		done <- result{resp, err}
	}()
	return done
}

// burstModel yields its texts at once, then its tool-call fragments, one
// for each value received on frags (nil: none).
type burstModel struct {
	texts []string
	frags chan runtime.ToolCallDelta
}

func (m burstModel) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	for _, s := range m.texts {
		if !yield(runtime.Delta{Text: s}) {
			return nil
		}
	}
	if m.frags == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case f, ok := <-m.frags:
			if !ok {
				return nil
			}
			if !yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{f}}) {
				return nil
			}
		}
	}
}

// TestIdleTimeoutIsNotASlowReader: the upstream sent every delta at once
// and a consumer took longer than idle_timeout over each. The wait was
// measured where deltas reach the layer, so the time spent in the
// consumer read as a stall: the first delta went out, the attempt was
// cancelled. The bound is paused while the consumer holds a delta.
func TestIdleTimeoutIsNotASlowReader(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"idle_timeout":"50ms","initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": burstModel{texts: []string{"a", "b", "c"}}}, Clock: clock})
	got := make(chan string)
	release := make(chan struct{})
	done := inBackground(func() (runtime.ChatResponse, error) {
		return pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
			got <- d.Text
			<-release
			return true
		})
	})
	var text string
	var r result
	for ended := false; !ended; {
		select {
		case s := <-got:
			text += s
			clock.Advance(120 * time.Millisecond) // the consumer is slow
			release <- struct{}{}
		case r = <-done:
			ended = true
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
	}
	require.NoError(t, r.err)
	assert.Equal(t, "abc", text)
	assert.Equal(t, 1, r.resp.Attempts)
}

// TestIdleTimeoutIsNotAHoldingLayer: a layer inside the retry that holds
// tool-call fragments until the stream ends (content_filter:
// runtime.HoldToolCalls) let nothing through while the upstream kept
// sending, and the retry read that as a stall. Arrival is measured where
// the deltas leave the model client; a retry inside another tells both.
func TestIdleTimeoutIsNotAHoldingLayer(t *testing.T) {
	retryLayer := rt.Layer("retry", `{"max_attempts":3,"idle_timeout":"50ms","initial_delay":"1ms","max_delay":"1ms"}`)
	filter := rt.Layer("content_filter", `{"keywords":["forbidden"]}`)
	for name, chain := range map[string][]plan.Layer{
		"one retry": {retryLayer, filter},
		"nested":    {retryLayer, retryLayer, filter},
	} {
		t.Run(name, func(t *testing.T) { holdingLayer(t, chain) })
	}
}

func holdingLayer(t *testing.T, chain []plan.Layer) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	frags := make(chan runtime.ToolCallDelta)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: chain}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": burstModel{texts: []string{"let me look"}, frags: frags}}, Clock: clock})
	done := inBackground(func() (runtime.ChatResponse, error) {
		return pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	})
	var r result
	send := func(f runtime.ToolCallDelta) bool {
		select {
		case frags <- f:
			return true
		case r = <-done:
			return false
		case <-time.After(10 * time.Second):
			t.Fatal("the model did not take a fragment")
			return false
		}
	}
	// One fragment every 20ms for 200ms: 10 in all.
	sent := send(runtime.ToolCallDelta{Index: 0, ID: "call_1", Name: "lookup", Arguments: `{"q":"`})
	for i := 0; sent && i < 9; i++ {
		clock.Advance(20 * time.Millisecond)
		args := "x"
		if i == 8 {
			args = `"}`
		}
		sent = send(runtime.ToolCallDelta{Index: 0, Arguments: args})
	}
	if sent {
		clock.Advance(20 * time.Millisecond)
		close(frags)
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
	}
	require.NoError(t, r.err)
	require.Len(t, r.resp.ToolCalls, 1)
	assert.Equal(t, "lookup", r.resp.ToolCalls[0].Name)
	assert.Equal(t, 1, r.resp.Attempts)
}

// heldThenStalled sends a tool-call fragment and stalls on its first call;
// its second call answers with a whole tool call.
type heldThenStalled struct{ calls *atomic.Int32 }

func (m heldThenStalled) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	if m.calls.Add(1) == 1 {
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "lookup", Arguments: `{"q":`}}})
		<-ctx.Done()
		return ctx.Err()
	}
	yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_2", Name: "lookup", Arguments: `{"q":"x"}`}}})
	return nil
}

// TestIdleTimeoutBeforeAnythingGotPastIsRetried: a stream that stalls while
// a layer inside holds all it sent delivered nothing past the retry, so
// its timeout is retried as an attempt_timeout is.
func TestIdleTimeoutBeforeAnythingGotPastIsRetried(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	m := heldThenStalled{calls: new(atomic.Int32)}
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"idle_timeout":"50ms","initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Layer("content_filter", `{"keywords":["forbidden"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}, Clock: clock})
	done := inBackground(func() (runtime.ChatResponse, error) {
		return pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	})
	var r result
	deadline := time.After(10 * time.Second)
	for ended := false; !ended; {
		select {
		case r = <-done:
			ended = true
		case <-deadline:
			t.Fatal("the stalled stream was not ended")
		default:
			clock.Advance(10 * time.Millisecond)
			goruntime.Gosched()
		}
	}
	require.NoError(t, r.err)
	require.Len(t, r.resp.ToolCalls, 1)
	assert.Equal(t, "call_2", r.resp.ToolCalls[0].ID)
	assert.Equal(t, 2, r.resp.Attempts)
	assert.Equal(t, int32(2), m.calls.Load())
}
