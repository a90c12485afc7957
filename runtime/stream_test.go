package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const fastRetry = `{"max_attempts":3,"initial_delay":"1ms","max_delay":"2ms"}`

func build(t *testing.T, chains plan.Chains, models map[string]runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	return buildWith(t, chains, runtime.Deps{Models: models})
}

func buildWith(t *testing.T, chains plan.Chains, deps runtime.Deps) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(chains), deps)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

var hi = []runtime.Message{{Role: "user", Content: "hi"}}

func TestRetryNeverReinvokesAfterTheFirstDelta(t *testing.T) {
	primary := rt.NewModel(
		rt.Response{Err: rt.Transient("before")},
		rt.Response{Deltas: []string{"a", "b", "c"}, Err: rt.Transient("mid-stream"), FailAfter: 2},
		rt.Response{Deltas: []string{"never"}},
	)
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("retry", fastRetry)}}, map[string]runtime.ModelClient{"primary": primary})
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: hi}, 0)
	require.ErrorContains(t, err, "mid-stream")
	assert.Equal(t, "ab", text)
	assert.Equal(t, 2, primary.Calls(), "a pre-stream failure is retried, a mid-stream one is not")
	assert.Equal(t, 2, resp.Attempts)
	assert.Equal(t, 2, resp.Deltas)
	assert.Equal(t, "primary", resp.Model)
}

func TestFallbackCommitsOnTheFirstDelta(t *testing.T) {
	tests := []struct {
		name         string
		primary      rt.Response
		wantText     string
		wantErr      string
		wantModel    string
		backupCalled int
	}{
		{"pre-stream transient falls over", rt.Response{Err: rt.Transient("down")}, "from backup", "", "backup", 1},
		{"pre-stream permanent does not", rt.Response{Err: rt.Permanent("bad request")}, "", "bad request", "", 0},
		{"mid-stream failure is committed", rt.Response{Deltas: []string{"x", "y"}, Err: rt.Transient("cut"), FailAfter: 1}, "x", "cut", "primary", 0},
		{"success stays", rt.Response{Deltas: []string{"ok"}}, "ok", "", "primary", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary := rt.NewModel(tt.primary)
			backup := rt.NewModel(rt.Response{Deltas: []string{"from ", "backup"}})
			pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}},
				map[string]runtime.ModelClient{"primary": primary, "backup": backup})
			text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: hi}, 0)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantText, text)
			assert.Equal(t, tt.wantModel, resp.Model)
			assert.Equal(t, tt.backupCalled, backup.Calls())
		})
	}
}

func meterOf(t *testing.T, pl *runtime.Pipeline) *meter.Meter {
	t.Helper()
	for _, l := range pl.Layers(plan.StageChat) {
		if m, ok := l.Middleware.(*meter.Meter); ok {
			return m
		}
	}
	t.Fatal("no meter layer")
	return nil
}

func TestMeterChargesWhatArrived(t *testing.T) {
	tests := []struct {
		name      string
		resp      rt.Response
		stopAfter int
		wantErr   bool
		want      runtime.Ledger
	}{
		// 4 deltas of 4 bytes; the consumer stops after 2: no usage report,
		// so the estimate is the transcript (1 token + 4 overhead) plus the
		// 8 bytes that arrived (2 tokens).
		{"consumer stops early", rt.Response{Deltas: []string{"aaaa", "bbbb", "cccc", "dddd"}, Usage: runtime.Usage{InputTokens: 100, OutputTokens: 100}}, 2, false,
			runtime.Ledger{InputTokens: 5, OutputTokens: 2, USD: (5*3 + 2*15) / 1e6, Calls: 1}},
		{"complete stream uses the report", rt.Response{Deltas: []string{"aaaa"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}}, 0, false,
			runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: 0.000105, Calls: 1}},
		{"failed mid-stream", rt.Response{Deltas: []string{"aaaa", "bbbb"}, Err: rt.Permanent("cut"), FailAfter: 1}, 0, true,
			runtime.Ledger{InputTokens: 5, OutputTokens: 1, USD: (5*3 + 1*15) / 1e6, Calls: 1}},
		{"pre-stream failure is free", rt.Response{Err: rt.Permanent("nope")}, 0, true, runtime.Ledger{}},
		// An answer without text and without a report: the prompt was read.
		{"empty answer without a report", rt.Response{}, 0, false,
			runtime.Ledger{InputTokens: 5, USD: 5 * 3 / 1e6, Calls: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := rt.NewModel(tt.resp)
			pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", "")}}, map[string]runtime.ModelClient{"primary": model})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: hi}, tt.stopAfter)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			got := meterOf(t, pl).Ledger("r")
			assert.Equal(t, tt.want.InputTokens, got.InputTokens)
			assert.Equal(t, tt.want.OutputTokens, got.OutputTokens)
			assert.InDelta(t, tt.want.USD, got.USD, 1e-12)
			assert.Equal(t, tt.want.Calls, got.Calls)
		})
	}
}

// A request cancelled after it went out is billed its input by the provider:
// the meter charges the estimate of it (the transcript "hi": 1 token + 4
// overhead) for each attempt that timed out, and the response of a hedge
// reports the winner's usage while a meter outside it also charges the racer
// it cancelled. Each request is cancelled once it went out (the model was
// called), whatever the time the pipeline took to send it: the attempt
// timeout on the pipeline's clock, the caller's deadline passing when the
// test says.
func TestMeterChargesCancelledRequestsTheirInput(t *testing.T) {
	t.Run("attempts that timed out", func(t *testing.T) {
		slow := rt.NewModel(rt.Response{Delay: 5 * time.Second, Deltas: []string{"late"}})
		sent := make(chan struct{}, 2)
		clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
		pl := buildWith(t, plan.Chains{Chat: []plan.Layer{
			rt.Layer("meter", ""),
			rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","attempt_timeout":"20ms"}`),
		}}, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": signalling(slow, sent)}, Clock: clock})
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
		done := make(chan error, 1)
		go func() {
			_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: hi}, 0)
			done <- err
		}()
		for range 2 {
			<-sent // the attempt's request went out; its timeout passes
			clock.Advance(20 * time.Millisecond)
		}
		require.Error(t, <-done)
		assert.Equal(t, 2, slow.Calls())
		got := meterOf(t, pl).Ledger("r")
		assert.Equal(t, int64(2*5), got.InputTokens, "two requests went out, each billed its input")
		assert.Zero(t, got.OutputTokens)
		assert.Equal(t, int64(1), got.Calls)
	})
	t.Run("a caller that gave up", func(t *testing.T) {
		slow := rt.NewModel(rt.Response{Delay: 5 * time.Second, Deltas: []string{"late"}})
		sent := make(chan struct{}, 1)
		pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", "")}}, map[string]runtime.ModelClient{"primary": signalling(slow, sent)})
		ctx := newPassingDeadline(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}))
		go func() {
			<-sent // the request went out; the caller's deadline passes
			ctx.pass()
		}()
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: hi}, 0)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int64(5), meterOf(t, pl).Ledger("r").InputTokens)
	})
	t.Run("a hedge's cancelled racer", func(t *testing.T) {
		slow := rt.NewModel(rt.Response{Delay: 5 * time.Second, Deltas: []string{"slow"}})
		fast := rt.NewModel(rt.Response{Deltas: []string{"fa", "st"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}})
		sent := make(chan struct{}, 1)
		// The backup answers once the primary's request went out: the
		// primary is the racer cancelled after it was sent.
		backup := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			select {
			case <-sent:
			case <-ctx.Done():
				return ctx.Err()
			}
			return fast.Stream(ctx, req, yield)
		})
		pl := build(t, plan.Chains{Chat: []plan.Layer{
			rt.Layer("meter", ""),
			rt.Layer("hedge", `{"models":["primary","backup"],"delay":"5ms"}`),
		}}, map[string]runtime.ModelClient{"primary": signalling(slow, sent), "backup": backup})
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
		_, resp, err := rt.Collect(ctx, pl, runtime.ChatRequest{Messages: hi}, 0)
		require.NoError(t, err)
		assert.Equal(t, runtime.Usage{InputTokens: 3, OutputTokens: 2}, resp.Usage, "the response reports the winner's usage")
		assert.Equal(t, 1, slow.Cancelled())
		got := meterOf(t, pl).Ledger("r")
		assert.Equal(t, int64(3+5), got.InputTokens, "the winner's input and the loser's")
		assert.Equal(t, int64(2), got.OutputTokens)
		assert.Equal(t, int64(1), got.Calls)
	})
}

// signalling returns m as a client that sends on sent as each of its
// requests goes out (the pipeline calls the client).
func signalling(m runtime.ModelClient, sent chan<- struct{}) runtime.ModelFunc {
	return func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		sent <- struct{}{}
		return m.Stream(ctx, req, yield)
	}
}

// passingDeadline is a context whose deadline passes when pass is called.
type passingDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newPassingDeadline(parent context.Context) *passingDeadline {
	return &passingDeadline{Context: parent, done: make(chan struct{})}
}

func (c *passingDeadline) pass() { c.once.Do(func() { close(c.done) }) }

func (c *passingDeadline) Done() <-chan struct{} { return c.done }

func (c *passingDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestMeterBudget(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 60, OutputTokens: 0}})
	pl := build(t, plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"budget":{"tokens":100},"scope":"run"}`),
		rt.Layer("test.cache", ""),
	}}, map[string]runtime.ModelClient{"primary": model})
	// The cache answers every call: nothing is charged, nothing refused.
	for range 3 {
		_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
		assert.True(t, resp.Cached)
	}
	assert.Zero(t, meterOf(t, pl).Ledger("").Calls)

	pl = build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"tokens":100},"scope":"run"}`)}},
		map[string]runtime.ModelClient{"primary": model})
	r1 := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, _, err := rt.Collect(r1, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err) // 60
	_, _, err = rt.Collect(r1, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err, "the crossing call runs") // 120: charged in full
	assert.Equal(t, int64(120), meterOf(t, pl).Ledger("r1").Tokens())
	_, _, err = rt.Collect(r1, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "meter", be.Layer)
	assert.Equal(t, "tokens", be.Resource)
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err))
	assert.Equal(t, 2, model.Calls(), "a refused call never reaches the model")

	// Another run has its own ledger.
	_, _, err = rt.Collect(runtime.WithRun(context.Background(), runtime.Run{ID: "r2"}), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
}

func TestMeterGlobalScopeAndToolCalls(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: 1})
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":2},"scope":"global"}`)}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	for i, run := range []string{"a", "b", "c"} {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}), runtime.ToolRequest{Name: "t"})
		if i < 2 {
			require.NoError(t, err)
		} else {
			require.ErrorAs(t, err, new(*runtime.BudgetError))
		}
	}
	assert.Equal(t, 2, tool.Calls())
}

func TestHedgeCancelsLosersWithoutLeaks(t *testing.T) {
	rt.CheckGoroutines(t)
	slow := rt.NewModel(rt.Response{Delay: 5 * time.Second, Deltas: []string{"slow"}})
	fast := rt.NewModel(rt.Response{Deltas: []string{"fa", "st"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}})
	// The backup answers only once the primary has started: on a loaded
	// machine the primary's goroutine may otherwise not run before the
	// backup has won, and a racer cancelled before it starts is never
	// called (so never counted as cancelled).
	backup := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for slow.Calls() == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return fast.Stream(ctx, req, yield)
	})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"5ms"}`)}},
		map[string]runtime.ModelClient{"primary": slow, "backup": backup})
	start := time.Now()
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Messages: hi}, 0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, "fast", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, runtime.Usage{InputTokens: 3, OutputTokens: 2}, resp.Usage)
	assert.Equal(t, 0, slow.Running(), "the loser returned before the call did")
	assert.Equal(t, 1, slow.Cancelled())
}

func TestHedgeStartsTheNextAtOnceOnAFailure(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Err: rt.Transient("down")})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"10s"}`)}},
		map[string]runtime.ModelClient{"primary": primary, "backup": backup})
	start := time.Now()
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Messages: hi}, 0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, "b", text)
	assert.Equal(t, "backup", resp.Model)

	// Every model failing returns the last error.
	backup2 := rt.NewModel(rt.Response{Err: rt.Transient("also down")})
	pl = build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"10s"}`)}},
		map[string]runtime.ModelClient{"primary": primary, "backup": backup2})
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Messages: hi}, 0)
	require.ErrorContains(t, err, "also down")
}

func TestHedgeConsumerStopEndsTheWinner(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"1", "2", "3"}, Hang: true})
	backup := rt.NewModel(rt.Response{Delay: 5 * time.Second, Deltas: []string{"never"}})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1ms"}`)}},
		map[string]runtime.ModelClient{"primary": primary, "backup": backup})
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Messages: hi}, 2)
	require.NoError(t, err)
	assert.Equal(t, "12", text)
	assert.Equal(t, 2, resp.Deltas)
	assert.Equal(t, 0, primary.Running())
	assert.Equal(t, 0, backup.Running())
}

// TestCancellationStopsEveryLayer cancels the caller's context while each
// kind of layer is waiting and checks that the call returns promptly with
// the context's error.
func TestCancellationStopsEveryLayer(t *testing.T) {
	tests := []struct {
		name   string
		chain  []plan.Layer
		models map[string]runtime.ModelClient
	}{
		{"model streaming", []plan.Layer{rt.Layer("tracing", ""), rt.Layer("meter", ""), rt.Layer("log", "")},
			map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"a"}, Hang: true})}},
		{"retry backoff", []plan.Layer{rt.Layer("retry", `{"max_attempts":5,"initial_delay":"10s","max_delay":"10s"}`)},
			map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Err: &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 10 * time.Second}})}},
		{"rate limit wait", []plan.Layer{rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":1}`), rt.Layer("retry", fastRetry)},
			map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"a"}})}},
		{"fallback then hedge", []plan.Layer{
			rt.Layer("fallback", `{"models":["primary","backup"]}`),
			rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1ms"}`),
		}, map[string]runtime.ModelClient{
			"primary": rt.NewModel(rt.Response{Delay: time.Hour}),
			"backup":  rt.NewModel(rt.Response{Delay: time.Hour}),
		}},
		{"attempt timeout", []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"attempt_timeout":"1h","initial_delay":"1ms","max_delay":"1ms"}`)},
			map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Delay: time.Hour})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt.CheckGoroutines(t)
			pl := build(t, plan.Chains{Chat: tt.chain}, tt.models)
			// The rate limit's bucket holds one token: spend it first.
			if tt.name == "rate limit wait" {
				_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
				require.NoError(t, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: hi}, 0)
			require.ErrorIs(t, err, context.Canceled)
			assert.Less(t, time.Since(start), time.Second)
			for name, m := range tt.models {
				assert.Zero(t, m.(*rt.Model).Running(), "model %s still running", name)
			}
		})
	}
}

func TestChatStreamIterator(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b", "c"}, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 3}})
	pl := build(t, plan.Chains{}, map[string]runtime.ModelClient{"primary": model})

	s := pl.Chat(context.Background(), runtime.ChatRequest{Model: "primary"})
	var got []string
	for d, err := range s.All() {
		require.NoError(t, err)
		got = append(got, d.Text)
	}
	assert.Equal(t, []string{"a", "b", "c"}, got)
	assert.Equal(t, "abc", s.Response().Text)
	assert.Equal(t, int64(3), s.Response().Usage.OutputTokens)
	for _, err := range s.All() {
		assert.ErrorContains(t, err, "already consumed")
	}

	// Breaking out abandons the stream.
	s = pl.Chat(context.Background(), runtime.ChatRequest{Model: "primary"})
	for d := range s.All() {
		assert.Equal(t, "a", d.Text)
		break
	}
	require.NoError(t, s.Err())
	assert.Equal(t, 1, s.Response().Deltas)

	// A failed call ends with its error.
	failing := rt.NewModel(rt.Response{Deltas: []string{"x", "y"}, Err: errors.New("broken"), FailAfter: 1})
	pl = build(t, plan.Chains{}, map[string]runtime.ModelClient{"primary": failing})
	s = pl.Chat(context.Background(), runtime.ChatRequest{Model: "primary"})
	var errs []error
	for _, err := range s.All() {
		errs = append(errs, err)
	}
	require.Len(t, errs, 2)
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "broken")

	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.Error(t, err)
	assert.Equal(t, "x", resp.Text)
}

// TestLateYieldIsDropped: a model client that keeps its yield after Stream
// returned (a reader goroutine it did not stop) must not deliver into the
// next call, which may reuse the recycled call state; the late delta is
// dropped and logged once.
func TestLateYieldIsDropped(t *testing.T) {
	var logs rt.LogBuffer
	release, late := make(chan struct{}), make(chan bool, 2)
	leaky := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		go func() {
			<-release
			late <- yield(runtime.Delta{Text: "SECRET-OF-A "})
			late <- yield(runtime.Delta{Text: "MORE-OF-A "})
		}()
		return nil
	})
	// waits until the late yields of call A happened while call B streams.
	waiting := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		close(release)
		assert.False(t, <-late, "a late yield is refused")
		assert.False(t, <-late, "a late yield is refused")
		yield(runtime.Delta{Text: "answer for B"})
		return nil
	})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{}), runtime.Deps{
		Models: map[string]runtime.ModelClient{"leaky": leaky, "waiting": waiting},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })

	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "leaky", Messages: hi})
	require.NoError(t, err)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "waiting", Messages: hi})
	require.NoError(t, err)
	assert.Equal(t, "answer for B", resp.Text)
	assert.Equal(t, 1, strings.Count(logs.String(), "yielded after its Stream returned"), logs.String())
}

// TestSplitUsageIsEstimatedPerSide: a stream that reports input usage on
// its first event and output usage on its last is charged, when abandoned in
// between, the reported input plus output estimated from the text that
// arrived (and the other way round).
func TestSplitUsageIsEstimatedPerSide(t *testing.T) {
	split := func(first, last runtime.Usage) runtime.ModelClient {
		return runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			if !yield(runtime.Delta{Text: "aaaa", Usage: first}) {
				return nil
			}
			for range 10 {
				if !yield(runtime.Delta{Text: "bbbb"}) {
					return nil
				}
			}
			yield(runtime.Delta{Usage: last})
			return nil
		})
	}
	tests := []struct {
		name        string
		first, last runtime.Usage
		stopAfter   int
		want        runtime.Usage
	}{
		// 3 deltas of 4 bytes arrived: 3 output tokens estimated.
		{"input first, abandoned", runtime.Usage{InputTokens: 100}, runtime.Usage{OutputTokens: 1000}, 3,
			runtime.Usage{InputTokens: 100, OutputTokens: 3}},
		// The transcript "hi" estimates 1 token plus 4 of overhead.
		{"output first, abandoned", runtime.Usage{OutputTokens: 7}, runtime.Usage{InputTokens: 100}, 3,
			runtime.Usage{InputTokens: 5, OutputTokens: 7}},
		{"complete uses the reports", runtime.Usage{InputTokens: 100}, runtime.Usage{OutputTokens: 1000}, 0,
			runtime.Usage{InputTokens: 100, OutputTokens: 1000}},
		// A complete stream's report is trusted, even a zero side.
		{"complete report of input only", runtime.Usage{InputTokens: 100}, runtime.Usage{}, 0,
			runtime.Usage{InputTokens: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", "")}},
				map[string]runtime.ModelClient{"primary": split(tt.first, tt.last)})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, resp, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: hi}, tt.stopAfter)
			require.NoError(t, err)
			assert.Equal(t, tt.want, resp.Usage)
			got := meterOf(t, pl).Ledger("r")
			assert.Equal(t, tt.want.InputTokens, got.InputTokens)
			assert.Equal(t, tt.want.OutputTokens, got.OutputTokens)
		})
	}
}

// TestAnAbandonedStreamIsChargedAtLeastItsBilledInput: a client that hangs
// up after the first delta of an OpenAI stream, before the usage chunk, is
// charged the estimate of its prompt; at four bytes a token a Chinese
// prompt was charged less than the provider bills (49 tokens by
// cl100k_base, 34 by o200k_base, for 144 bytes), and emoji, digits or
// base64 under a third of it.
func TestAnAbandonedStreamIsChargedAtLeastItsBilledInput(t *testing.T) {
	const prompt, billed = "预算在调用运行之前预留，并在调用结束后结算。账本存储中的一个原子步骤保证并发调用者不会超过上限。", 49
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for range 5 {
			if !yield(runtime.Delta{Text: "好"}) {
				return nil
			}
		}
		yield(runtime.Delta{Usage: runtime.Usage{InputTokens: billed, OutputTokens: 5}})
		return nil
	})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", "")}}, map[string]runtime.ModelClient{"primary": model})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: prompt}}}, 1)
	require.NoError(t, err)
	got := meterOf(t, pl).Ledger("r")
	assert.GreaterOrEqual(t, got.InputTokens, int64(billed), "the prompt's estimate covers what the provider bills for it")
	assert.GreaterOrEqual(t, got.OutputTokens, int64(1), "the delta that arrived")
}

// TestFailureCarriesWhatWasBilled: a model client's failure carries the
// usage its provider billed and no delta carried (CallError.Usage); the
// call is charged it, after text or before any, and a retry still retries
// a call that failed before its first delta.
func TestFailureCarriesWhatWasBilled(t *testing.T) {
	attempts := 0
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		attempts++
		if attempts == 1 {
			return &runtime.CallError{Kind: runtime.KindTransient, Message: "overloaded", Usage: runtime.Usage{InputTokens: 100, CachedInputTokens: 40}}
		}
		if !yield(runtime.Delta{Text: "aaaa", Usage: runtime.Usage{InputTokens: 100}}) {
			return nil
		}
		return &runtime.CallError{Kind: runtime.KindTransient, Message: "cut", Usage: runtime.Usage{OutputTokens: 9}}
	})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", ""), rt.Layer("retry", `{"max_attempts": 3, "initial_delay": "1ms"}`)}},
		map[string]runtime.ModelClient{"primary": model})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: hi})
	require.ErrorContains(t, err, "cut")
	assert.Equal(t, 2, attempts, "the failure before any delta was retried, the one after was not")
	assert.Equal(t, runtime.Usage{InputTokens: 100, OutputTokens: 9}, resp.Usage,
		"the last attempt's: the reported output, not an estimate of the text; the retried attempt's is discarded")
	assert.Equal(t, []runtime.Charge{{Model: "primary", Usage: runtime.Usage{InputTokens: 100, CachedInputTokens: 40}},
		{Model: "primary", Usage: runtime.Usage{InputTokens: 100, OutputTokens: 9}}}, resp.Charges)
	got := meterOf(t, pl).Ledger("r")
	assert.Equal(t, int64(200), got.InputTokens, "both attempts are charged")
	assert.Equal(t, int64(9), got.OutputTokens)
}

// A refusal (deltas marked Refusal) is collected as one: Complete and
// ChatStream say its text is a refusal; an answer's text is not one.
func TestRefusalIsCollected(t *testing.T) {
	refusal := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		_ = yield(runtime.Delta{Refusal: true}) && yield(runtime.Delta{Text: "I can't", Refusal: true}) &&
			yield(runtime.Delta{FinishReason: runtime.FinishContentFilter})
		return nil
	})
	answer := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		_ = yield(runtime.Delta{Refusal: true}) && yield(runtime.Delta{Text: "Hello", FinishReason: runtime.FinishStop})
		return nil
	})
	pl := build(t, plan.Chains{}, map[string]runtime.ModelClient{"refusal": refusal, "answer": answer})
	for model, want := range map[string]bool{"refusal": true, "answer": false} {
		resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: model, Messages: hi})
		require.NoError(t, err)
		assert.Equal(t, want, resp.Refusal, model)
		s := pl.Chat(context.Background(), runtime.ChatRequest{Model: model, Messages: hi})
		for _, err := range s.All() {
			require.NoError(t, err)
		}
		assert.Equal(t, want, s.Response().Refusal, model)
		assert.Equal(t, resp.Text, s.Response().Text)
	}
}
