package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func build(t *testing.T, config string) (*runtime.Pipeline, *rt.Tool) {
	t.Helper()
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit", config)}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	return pl, tool
}

func TestRejectMode(t *testing.T) {
	pl, tool := build(t, `{"rate":1,"per":"1h","burst":2,"mode":"reject"}`)
	for range 2 {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
		require.NoError(t, err)
	}
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindRateLimited, ce.Kind)
	assert.Equal(t, "rate_limit", ce.Layer)
	assert.InDelta(t, time.Hour.Seconds(), ce.RetryAfter.Seconds(), 1)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "a rejection may be redelivered")
	assert.True(t, runtime.IsTransient(err))
	assert.True(t, runtime.DidNotRun(err), "refused before the tool ran: a retry may try a side-effecting tool again")
	assert.Equal(t, 2, tool.Calls())
}

func TestWaitModeRefillsAndRespectsCancellation(t *testing.T) {
	pl, tool := build(t, `{"rate":50,"per":"1s","burst":1,"mode":"wait"}`)
	start := time.Now()
	for range 3 {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
		require.NoError(t, err)
	}
	// One token at once, then one every 20ms.
	assert.GreaterOrEqual(t, time.Since(start), 35*time.Millisecond)
	assert.Equal(t, 3, tool.Calls())

	slow, _ := build(t, `{"rate":1,"per":"1h","burst":1}`)
	_, err := slow.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = slow.Tool(ctx, runtime.ToolRequest{Name: "t"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
}

func TestRunScope(t *testing.T) {
	pl, _ := build(t, `{"rate":1,"per":"1h","burst":1,"mode":"reject","scope":"run"}`)
	for _, run := range []string{"a", "b"} {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}), runtime.ToolRequest{Name: "t"})
		require.NoError(t, err, "each run has its own bucket")
	}
	_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "a"}), runtime.ToolRequest{Name: "t"})
	require.Error(t, err)
}

func TestTurnAndChat(t *testing.T) {
	p := rt.Plan(plan.Chains{
		Turn: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","mode":"reject"}`)},
		Chat: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","mode":"reject"}`)},
	})
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	body := func(context.Context) (string, error) { return "out", nil }
	_, err = pl.Turn(context.Background(), runtime.TurnRequest{Input: "a"}, body)
	require.NoError(t, err)
	_, err = pl.Turn(context.Background(), runtime.TurnRequest{Input: "b"}, body)
	assert.Equal(t, "rate_limited", runtime.KindOf(err))
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	assert.Equal(t, "rate_limited", runtime.KindOf(err))
	assert.Equal(t, 1, model.Calls())
}

func TestEndRunDropsTheRunsBucket(t *testing.T) {
	pl, tool := build(t, `{"rate":1,"per":"1h","burst":1,"mode":"reject","scope":"run"}`)
	defer pl.Close()
	a := runtime.WithRun(context.Background(), runtime.Run{ID: "a"})
	b := runtime.WithRun(context.Background(), runtime.Run{ID: "b"})
	for _, ctx := range []context.Context{a, b} {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
		require.NoError(t, err)
	}
	pl.EndRun("a")
	_, err := pl.Tool(a, runtime.ToolRequest{Name: "t"})
	require.NoError(t, err, "the run's bucket was dropped")
	_, err = pl.Tool(b, runtime.ToolRequest{Name: "t"})
	require.Error(t, err, "other runs keep theirs")
	assert.Equal(t, 3, tool.Calls())
	pl.EndRun("never seen")
}

func TestKeyScopeLimitsEachTenant(t *testing.T) {
	pl, tool := build(t, `{"rate":1,"per":"1h","burst":1,"mode":"reject","scope":"key"}`)
	defer pl.Close()
	call := func(run, tenant string) error {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: tenant}), runtime.ToolRequest{Name: "t"})
		return err
	}
	require.NoError(t, call("r1", "acme"))
	require.NoError(t, call("r1", "globex"), "each tenant has its own limit")
	assert.Equal(t, "rate_limited", runtime.KindOf(call("r2", "acme")), "across runs of one tenant")
	assert.Equal(t, 2, tool.Calls())
}

func TestBlockModeIsFinal(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":5,"initial_delay":"1ms"}`),
		rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":1,"mode":"block"}`),
	}}), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "rate_limit", b.Layer)
	assert.Contains(t, b.Message, "rate limit of 1 per 1h0m0s exceeded")
	assert.False(t, runtime.IsTransient(err))
	assert.Equal(t, 1, tool.Calls(), "the retry outside did not repeat the blocked call")
}

func TestSharedLimiterAcrossStages(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{
		Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":2,"mode":"reject","limiter":"shared"}`)},
		Turn: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":2,"mode":"block","limiter":"shared"}`)},
	}), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	_, err = pl.Turn(context.Background(), runtime.TurnRequest{Input: "hi"}, turnFn)
	require.NoError(t, err)
	// Both tokens are gone: the tool layer rejects, the turn layer blocks.
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindRateLimited, ce.Kind)
	_, err = pl.Turn(context.Background(), runtime.TurnRequest{Input: "hi"}, turnFn)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, 1, tool.Calls())
}

func TestUnsharedLimitersAreSeparate(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{
		Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":1,"mode":"reject"}`)},
		Turn: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":1,"mode":"reject"}`)},
	}), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	_, err = pl.Turn(context.Background(), runtime.TurnRequest{Input: "hi"}, turnFn)
	require.NoError(t, err, "a layer without a limiter name has its own bucket")
}

func TestSharedLimiterMustAgree(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":2,"limiter":"shared"}`)},
		Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate":5,"per":"1h","burst":2,"limiter":"shared"}`)},
	}), runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `limiter "shared" is shared with layer "rate_limit" of the chat chain`)
	assert.Contains(t, err.Error(), "rate 1 per 1h0m0s")
}

func TestBlockModeValidates(t *testing.T) {
	known, err := runtime.ValidateConfig("rate_limit", []byte(`{"rate":1,"mode":"drop"}`))
	assert.True(t, known)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"wait", "reject" or "block"`)
}

func turnFn(context.Context) (string, error) { return "ok", nil }

// An interval that is not a whole number of nanoseconds (5ns / 3) was
// rounded down, to 1ns: the limiter let 5 calls through where its rate
// allows 3. Rounded up, over any time it admits at most rate·t/per + burst.
func TestAFractionalIntervalIsRoundedUp(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(0, 0))
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("rate_limit", `{"rate":3,"per":"5ns","burst":1,"mode":"reject"}`)}}),
		runtime.Deps{Clock: clock, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	admit := func() int {
		before := tool.Calls()
		for {
			if _, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"}); err != nil {
				return tool.Calls() - before
			}
		}
	}
	n := 0
	for range 5000 {
		n += admit()
		clock.Advance(time.Nanosecond)
	}
	assert.LessOrEqual(t, n, 3000+1, "5000ns at 3 per 5ns, and the burst")
}

// TestAReloadThatRaisesTheRateTakesEffectAtOnce: a policy reloaded with a
// higher rate finds the bucket the old one used (the same store) and
// spaces calls at the new rate from the next call on, not at the old
// interval until the bucket drains; reloaded back, the old rate holds again.
func TestAReloadThatRaisesTheRateTakesEffectAtOnce(t *testing.T) {
	mem := runtime.NewMemoryStore()
	ctx := context.Background()
	load := func(config string) *runtime.Pipeline {
		pl, err := runtime.Build(ctx, rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit", config)}}),
			runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": rt.NewTool(rt.ToolResult{Value: 1}).Func()}, Memory: mem})
		require.NoError(t, err)
		return pl
	}
	retryAfter := func(pl *runtime.Pipeline) time.Duration {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		return ce.RetryAfter
	}
	hourly := load(`{"rate":1,"per":"1h","mode":"reject"}`)
	_, err := hourly.Tool(ctx, runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.InDelta(t, time.Hour.Seconds(), retryAfter(hourly).Seconds(), 1)
	assert.InDelta(t, time.Minute.Seconds(), retryAfter(load(`{"rate":60,"per":"1h","mode":"reject"}`)).Seconds(), 1)
	assert.InDelta(t, time.Hour.Seconds(), retryAfter(load(`{"rate":1,"per":"1h","mode":"reject"}`)).Seconds(), 1)
}
