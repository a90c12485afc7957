package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/fallback"
	"github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	"github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// readOnly returns a plan of chains that declares the tool "t" free of
// side effects, so that a retry runs it again after any transient failure.
func readOnly(chains plan.Chains) *plan.Plan {
	p := rt.Plan(chains)
	p.Tools = map[string]plan.Tool{"t": {}}
	return p
}

func buildTool(t *testing.T, config string, tool *rt.Tool) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), readOnly(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", config)}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	return pl
}

type statusErr int

func (s statusErr) Error() string   { return "status" }
func (s statusErr) StatusCode() int { return int(s) }

func TestRetryClassification(t *testing.T) {
	const cfg = `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`
	tests := []struct {
		name      string
		err       error
		wantCalls int
	}{
		{"transient is retried", rt.Transient("503"), 3},
		{"unclassified is retried", errors.New("boom"), 3},
		{"status 429 is retried", statusErr(429), 3},
		{"permanent fails fast", rt.Permanent("400"), 1},
		{"status 404 fails fast", statusErr(404), 1},
		{"blocked fails fast", &runtime.BlockedError{Layer: "g", Message: "no"}, 1},
		{"budget fails fast", &runtime.BudgetError{Layer: "m", Resource: "calls"}, 1},
		{"deadline is retried", context.DeadlineExceeded, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := rt.NewTool(rt.ToolResult{Err: tt.err})
			res, err := buildTool(t, cfg, tool).Tool(context.Background(), runtime.ToolRequest{Name: "t"})
			require.ErrorIs(t, err, tt.err)
			assert.Equal(t, tt.wantCalls, tool.Calls())
			assert.Equal(t, tt.wantCalls, res.Attempts, "attempts stamped on meta")
		})
	}
}

func TestRetrySucceedsAfterTransientFailures(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("a")}, rt.ToolResult{Value: "ok"})
	res, err := buildTool(t, `{"max_attempts":5,"initial_delay":"1ms","max_delay":"1ms"}`, tool).
		Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, "ok", res.Value)
	assert.Equal(t, 2, res.Attempts)
}

func TestRetryNeverRetriesTheCallersCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tool := rt.NewTool(rt.ToolResult{Hang: true})
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err := buildTool(t, `{"max_attempts":5,"initial_delay":"1ms","max_delay":"1ms"}`, tool).
		Tool(ctx, runtime.ToolRequest{Name: "t"})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, tool.Calls())
}

func TestRetryRetriesAnAttemptTimeout(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Hang: true}, rt.ToolResult{Value: "second"})
	res, err := buildTool(t, `{"max_attempts":3,"attempt_timeout":"10ms","initial_delay":"1ms","max_delay":"1ms"}`, tool).
		Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, "second", res.Value)
	assert.Equal(t, 2, tool.Calls())

	// Chat: the timeout bounds the time to the first delta only.
	slowStart := rt.NewModel(rt.Response{Delay: time.Hour}, rt.Response{Deltas: []string{"late"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":2,"attempt_timeout":"10ms","initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": slowStart}})
	require.NoError(t, err)
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "late", text)
	assert.Equal(t, 2, resp.Attempts)

	// Exhausted attempts report the timeout kind.
	always := rt.NewModel(rt.Response{Delay: time.Hour})
	pl, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":2,"attempt_timeout":"5ms","initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": always}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	assert.Equal(t, "timeout", runtime.KindOf(err))
	assert.Equal(t, "retry", runtime.LayerOf(err))
	assert.Equal(t, 2, always.Calls())
}

func TestDelay(t *testing.T) {
	r := retry.New()
	r.InitialDelay = runtime.Duration(100 * time.Millisecond)
	r.MaxDelay = runtime.Duration(time.Second)
	r.Multiplier = 2
	tests := []struct {
		name     string
		attempt  int
		err      error
		min, max time.Duration
	}{
		{"first backoff within initial", 1, errors.New("x"), 0, 100 * time.Millisecond},
		{"third backoff within 400ms", 3, errors.New("x"), 0, 400 * time.Millisecond},
		{"capped by max_delay", 10, errors.New("x"), 0, time.Second},
		{"retry-after honoured", 1, &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 700 * time.Millisecond}, 700 * time.Millisecond, 700 * time.Millisecond},
		{"retry-after capped", 1, &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: time.Hour}, time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var maxSeen time.Duration
			for range 200 {
				d := r.Delay(tt.attempt, tt.err)
				assert.GreaterOrEqual(t, d, tt.min)
				assert.LessOrEqual(t, d, tt.max)
				maxSeen = max(maxSeen, d)
			}
			if tt.min == 0 {
				assert.Greater(t, maxSeen, tt.max/2, "full jitter spreads over the whole range")
			}
		})
	}
}

func TestRetryAfterIsWaited(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 30 * time.Millisecond}}, rt.ToolResult{Value: 1})
	start := time.Now()
	_, err := buildTool(t, `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1s"}`, tool).Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestBreakerOpensAndFallbackFallsOver(t *testing.T) {
	primary := rt.NewModel(rt.Response{Err: rt.Transient("down")})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("fallback", `{"models":["primary","backup"]}`),
		rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms","breaker":{"failures":2,"cooldown":"300ms"}}`),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)

	// Call 1: two failures on primary open its breaker; backup serves.
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, 2, primary.Calls())

	// Call 2: the open breaker refuses primary without calling it.
	_, resp, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, 2, primary.Calls())

	// After the cooldown one trial call goes through; it fails and reopens.
	time.Sleep(350 * time.Millisecond)
	_, resp, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, 3, primary.Calls())
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, 3, primary.Calls(), "reopened after the failed trial")
}

func TestBreakerOpenErrorWithoutFallback(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("down")}, rt.ToolResult{Err: rt.Transient("down")}, rt.ToolResult{Value: "up"})
	pl := buildTool(t, `{"max_attempts":1,"initial_delay":"1ms","max_delay":"1ms","breaker":{"failures":2,"cooldown":"300ms"}}`, tool)
	for range 2 {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
		require.Error(t, err)
	}
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	var bo *runtime.BreakerOpenError
	require.ErrorAs(t, err, &bo)
	assert.Equal(t, "t", bo.Key)
	assert.Equal(t, "breaker_open", runtime.KindOf(err))
	assert.Equal(t, 2, tool.Calls())
	time.Sleep(350 * time.Millisecond)
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err, "the trial succeeds and closes the breaker")
	assert.Equal(t, "up", res.Value)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
}

func TestBackoffFollowsTheClock(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("a")}, rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 40 * time.Second}},
		rt.ToolResult{Value: "ok"})
	pl := rt.Build(t, readOnly(plan.Chains{Tool: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1m","max_delay":"1m"}`)}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}, Clock: clock})
	wall := time.Now()
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, "ok", res.Value)
	assert.Less(t, time.Since(wall), 5*time.Second, "the backoff waits on the virtual clock")
	el := clock.Now().Sub(start)
	assert.GreaterOrEqual(t, el, 40*time.Second, "the Retry-After of the second failure was waited virtually")
	assert.LessOrEqual(t, el, 100*time.Second)
}

func TestBreakerTrialThatPanicsDoesNotWedgeTheBreaker(t *testing.T) {
	calls := 0
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		calls++
		switch calls {
		case 1, 2:
			return nil, rt.Transient("down")
		case 3:
			panic("tool bug")
		}
		return "up", nil
	}
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry",
		`{"max_attempts":1,"initial_delay":"1ms","max_delay":"1ms","breaker":{"failures":2,"cooldown":"100ms"}}`)}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool}})
	require.NoError(t, err)
	for range 2 {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
		require.Error(t, err)
	}
	time.Sleep(150 * time.Millisecond)
	assert.PanicsWithValue(t, "tool bug", func() {
		_, _ = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	}, "the trial call panics")
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err, "a trial that panicked says nothing of the tool's health: the next call is a trial again")
	assert.Equal(t, "up", res.Value)
	assert.Equal(t, 4, calls)
}

// TestAStaleAttemptDoesNotEndSomeoneElsesTrial: a call admitted while the
// breaker was closed that ends during the trial of the reopened breaker
// (with a permanent error, or a success) leaves the trial to its owner: the
// breaker still admits no second trial.
func TestAStaleAttemptDoesNotEndSomeoneElsesTrial(t *testing.T) {
	for name, stale := range map[string]func() (any, error){
		"permanent error": func() (any, error) { return nil, rt.Permanent("bad request") },
		"success":         func() (any, error) { return "late", nil },
	} {
		t.Run(name, func(t *testing.T) {
			staleGo, trialGo := make(chan struct{}), make(chan struct{})
			staleIn, trialIn := make(chan struct{}), make(chan struct{})
			tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
				switch c.Args["who"] {
				case "stale":
					close(staleIn)
					<-staleGo
					return stale()
				case "failing":
					return nil, rt.Transient("down")
				case "trial":
					close(trialIn)
					<-trialGo
					return "up", nil
				}
				return "other", nil
			}
			pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry",
				`{"max_attempts":1,"initial_delay":"1ms","max_delay":"1ms","breaker":{"failures":1,"cooldown":"50ms"}}`)}}),
				runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool}})
			require.NoError(t, err)
			call := func(who string) (runtime.ToolResult, error) {
				return pl.Tool(context.Background(), runtime.ToolRequest{Name: "t", Args: map[string]any{"who": who}})
			}
			staleDone := make(chan struct{})
			go func() { defer close(staleDone); _, _ = call("stale") }()
			<-staleIn
			_, err = call("failing")
			require.Error(t, err, "the failure opens the breaker")
			time.Sleep(70 * time.Millisecond)
			trialDone := make(chan error, 1)
			go func() { _, err := call("trial"); trialDone <- err }()
			<-trialIn
			close(staleGo)
			<-staleDone
			_, err = call("other")
			var bo *runtime.BreakerOpenError
			require.ErrorAs(t, err, &bo, "the trial is still in flight: no second trial, and the breaker is not closed under it")
			close(trialGo)
			require.NoError(t, <-trialDone)
			res, err := call("other")
			require.NoError(t, err, "the trial's success closes the breaker")
			assert.Equal(t, "other", res.Value)
		})
	}
}

// TestAFailedAttemptsUsageIsDiscarded: an attempt that failed after its
// provider billed it (a reported input, then a transient error) or that
// ran out of attempt_timeout after its request went out (the estimate of
// its input) made no part of the response: its usage was added to the
// response's, so a caller read the served attempt's tokens plus those of
// every attempt before it. It is now the call's discarded usage, which a
// meter outside still charges.
func TestAFailedAttemptsUsageIsDiscarded(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: strings.Repeat("lorem ipsum dolor ", 300)}}}
	served := runtime.Usage{InputTokens: 100, OutputTokens: 50}
	for _, tc := range []struct {
		name   string
		first  rt.Response
		billed runtime.Usage
	}{
		{"billed, then failed", rt.Response{Err: &runtime.CallError{Kind: runtime.KindTransient, Message: "overloaded", Usage: runtime.Usage{InputTokens: 1_000}}},
			runtime.Usage{InputTokens: 1_000}},
		{"timed out", rt.Response{Deltas: []string{"late"}, Delay: time.Hour}, runtime.EstimateInput(&req)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Positive(t, tc.billed.InputTokens)
			model := rt.NewModel(tc.first, rt.Response{Deltas: []string{"fine"}, Usage: served})
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"global"}`),
				rt.Layer("retry", `{"max_attempts":2,"attempt_timeout":"20ms","initial_delay":"1ms","max_delay":"1ms"}`)}})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			text, resp, err := rt.Collect(context.Background(), pl, req, 0)
			require.NoError(t, err)
			assert.Equal(t, "fine", text)
			assert.Equal(t, 2, resp.Attempts)
			assert.Equal(t, served, resp.Usage, "the served attempt's usage alone")
			assert.Equal(t, []runtime.Charge{{Model: "primary", Usage: tc.billed}, {Model: "primary", Usage: served}}, resp.Charges)

			l := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter).Ledger("any run")
			assert.Equal(t, served.InputTokens+tc.billed.InputTokens, l.InputTokens, "the meter charges both attempts")
			assert.Equal(t, served.OutputTokens, l.OutputTokens)
			assert.InDelta(t, meter.Cost(p.Models["primary"], served)+meter.Cost(p.Models["primary"], tc.billed), l.USD, 1e-12)
		})
	}
}

// stepModel streams one text delta for each string sent on its channel,
// until the channel closes or the call's context ends.
type stepModel struct{ steps chan string }

func (m stepModel) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s, ok := <-m.steps:
			if !ok {
				return nil
			}
			if !yield(runtime.Delta{Text: s}) {
				return nil
			}
		}
	}
}

// TestIdleTimeoutEndsAStreamThatStalls: attempt_timeout bounds only the
// time to the first delta, so a stream that stalled after it held the call
// (and, behind agentc serve, its slot) until the caller gave up.
// idle_timeout bounds the wait for each later delta: deltas that keep
// coming pass however long the stream lasts, a stall longer than the bound
// ends the call with a timeout, not retried once content went out.
func TestIdleTimeoutEndsAStreamThatStalls(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	m := stepModel{steps: make(chan string)}
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"idle_timeout":"50ms","initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}, Clock: clock})
	got := make(chan string, 16)
	done := inBackground(func() (runtime.ChatResponse, error) {
		return pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
			got <- d.Text
			return true
		})
	})
	// Four deltas 30ms apart: 90ms in all, each within the bound.
	for _, s := range []string{"a", "b", "c", "d"} {
		m.steps <- s
		require.Equal(t, s, <-got)
		clock.Advance(30 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("the call ended while its deltas kept coming: %v", r.err)
	default:
	}
	clock.Advance(30 * time.Millisecond) // 60ms since "d"
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream stalled past idle_timeout was not ended")
	}
	require.Error(t, r.err)
	assert.Equal(t, "timeout", runtime.KindOf(r.err))
	assert.Equal(t, "retry", runtime.LayerOf(r.err))
	assert.Contains(t, r.err.Error(), "idle_timeout 50ms")
	assert.Equal(t, 1, r.resp.Attempts, "a stream that delivered content is not retried")
}

// TestIdleTimeoutIsValidated: a bound of zero or below is refused.
func TestIdleTimeoutIsValidated(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"idle_timeout":"0s"}`)}}), runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "idle_timeout must be positive")
}

// A Retry-After longer than max_delay is not waited out in part: the next
// attempt would come before the callee said it could succeed, so the
// failure is returned at once, its Retry-After kept for the caller.
func TestRetryAfterBeyondMaxDelayIsNotRetried(t *testing.T) {
	long := &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: time.Hour}
	clock := runtime.NewVirtualClock(time.Unix(0, 0))
	tool := rt.NewTool(rt.ToolResult{Err: long}, rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), readOnly(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"max_delay":"10s"}`)}}),
		runtime.Deps{Clock: clock, Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.ErrorIs(t, err, long)
	ra, ok := runtime.RetryAfterOf(err)
	require.True(t, ok)
	assert.Equal(t, time.Hour, ra)
	assert.Equal(t, 1, tool.Calls())
	assert.Equal(t, time.Unix(0, 0), clock.Now(), "no wait")

	model := rt.NewModel(rt.Response{Err: long}, rt.Response{Deltas: []string{"ok"}})
	pl, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"max_delay":"10s"}`)}}),
		runtime.Deps{Clock: clock, Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorIs(t, err, long)
	assert.Equal(t, 1, model.Calls())
	assert.Equal(t, time.Unix(0, 0), clock.Now(), "no wait")

	// A Retry-After within max_delay is waited, then tried again.
	short := &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 10 * time.Second}
	model = rt.NewModel(rt.Response{Err: short}, rt.Response{Deltas: []string{"ok"}})
	pl, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"max_delay":"10s"}`)}}),
		runtime.Deps{Clock: clock, Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	text, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "ok", text)
	assert.Equal(t, time.Unix(10, 0), clock.Now())
}

// A rate_limit in reject mode inside the retry, its next slot further off
// than max_delay: the call past the limit is refused at once, with the
// rate limit's Retry-After, rather than held max_delay for an attempt the
// limit refuses again.
func TestRetryOutsideRejectingRateLimitAnswersAtOnce(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(0, 0))
	model := rt.NewModel(rt.Response{Deltas: []string{"a"}}, rt.Response{Deltas: []string{"b"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":2}`),
		rt.Layer("rate_limit", `{"rate":1,"per":"1m","burst":1,"mode":"reject"}`),
	}}), runtime.Deps{Clock: clock, Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	assert.Equal(t, "rate_limited", runtime.KindOf(err))
	ra, ok := runtime.RetryAfterOf(err)
	require.True(t, ok)
	assert.InDelta(t, time.Minute.Seconds(), ra.Seconds(), 1)
	assert.Equal(t, time.Unix(0, 0), clock.Now(), "the client is not held max_delay")
	assert.Equal(t, 1, model.Calls())
}
