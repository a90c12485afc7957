package hedge_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/hedge"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func build(t *testing.T, config string, primary, backup *rt.Model) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	return pl
}

func TestPrimaryWinsBeforeTheDelay(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"p"}})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1h"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "p", text)
	assert.Equal(t, "primary", resp.Model)
	assert.Zero(t, backup.Calls(), "no hedge before the delay")
}

// afterFailure returns a model that fails permanently with msg and one that runs m once
// the hedge has taken that failure: the order of the race is fixed by events, not by
// delays. A racer's context ends once the hedge has received its end (or the race is
// over): waiting for less (the failing client's return) would let a loaded machine
// deliver the waiting model's end to the hedge first.
func afterFailure(msg string, m *rt.Model) (failing, waiting runtime.ModelClient, calls func() int) {
	failed := make(chan struct{})
	var n atomic.Int64
	failing = runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, _ func(runtime.Delta) bool) error {
		n.Add(1)
		go func() {
			<-ctx.Done()
			close(failed)
		}()
		return rt.Permanent(msg)
	})
	waiting = runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		select {
		case <-failed:
		case <-ctx.Done():
			return ctx.Err()
		}
		return m.Stream(ctx, req, yield)
	})
	return failing, waiting, func() int { return int(n.Load()) }
}

func TestAPermanentFailureDoesNotEndTheRace(t *testing.T) {
	rt.CheckGoroutines(t)
	backup, primary, backupCalls := afterFailure("backup rejects request", rt.NewModel(rt.Response{Deltas: []string{"p"}}))
	text, resp, err := rt.Collect(context.Background(), buildClients(t, `{"models":["primary","backup"],"delay":"5ms"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err, "the healthy primary still wins")
	assert.Equal(t, "p", text)
	assert.Equal(t, "primary", resp.Model)
	assert.Equal(t, 1, backupCalls())
}

func TestAPermanentFailureStartsTheNextAtOnce(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Err: rt.Permanent("bad request")})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	start := time.Now()
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1h"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "b", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Less(t, time.Since(start), time.Second, "the backup did not wait for the delay")
}

func TestEveryModelFailingReturnsTheLastError(t *testing.T) {
	rt.CheckGoroutines(t)
	primaryModel := rt.NewModel(rt.Response{Err: rt.Permanent("primary rejects request")})
	backup, primary, _ := afterFailure("backup rejects request", primaryModel)
	_, _, err := rt.Collect(context.Background(), buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.ErrorContains(t, err, "primary rejects request", "the race ends when the last running model fails")
	assert.Zero(t, primaryModel.Running())
}

func buildClients(t *testing.T, config string, primary, backup runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	return pl
}

func TestAPanickingModelPanicsInTheCaller(t *testing.T) {
	rt.CheckGoroutines(t)
	boom := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("client bug") })
	pl := buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, boom, boom)
	assert.PanicsWithValue(t, "client bug", func() { _, _, _ = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0) })
}

func TestAPanicCancelsAndAwaitsTheOtherRacers(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Delay: time.Hour, Deltas: []string{"never"}})
	// The backup panics only once the primary's client is running, however late a loaded
	// machine schedules it: the panic must then cancel it and wait for it to return.
	started := make(chan struct{})
	first := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		close(started)
		return primary.Stream(ctx, req, yield)
	})
	boom := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error {
		<-started
		panic("client bug")
	})
	pl := buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, first, boom)
	assert.PanicsWithValue(t, "client bug", func() { _, _, _ = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0) })
	assert.Zero(t, primary.Running(), "the other racer returned before the panic reached the caller")
	assert.Equal(t, 1, primary.Cancelled(), "the primary ended by cancellation, not by its hour-long delay")
}

func TestAPanickingConsumerLeaksNoRacer(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"1", "2"}, Hang: true})
	backup := rt.NewModel(rt.Response{Delay: 20 * time.Millisecond, Deltas: []string{"b"}})
	pl := build(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, backup)
	assert.PanicsWithValue(t, "consumer bug", func() {
		_, _ = pl.Stream(context.Background(), runtime.ChatRequest{}, func(runtime.Delta) bool { panic("consumer bug") })
	})
	assert.Zero(t, primary.Running(), "the winner returned before the panic reached the caller")
	assert.Zero(t, backup.Running())
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary"]}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "at least two models")
}

func TestFirstSuccessCoversAMidStreamFailure(t *testing.T) {
	rt.CheckGoroutines(t)
	mk := func() (*rt.Model, *rt.Model) {
		return rt.NewModel(rt.Response{Deltas: []string{"p1", "p2"}, Err: rt.Transient("connection reset"), FailAfter: 1}),
			rt.NewModel(rt.Response{Deltas: []string{"b1", "b2"}})
	}
	primary, backup := mk()
	text, resp, err := rt.Collect(context.Background(),
		build(t, `{"models":["primary","backup"],"delay":"1h","win":"first_success"}`, primary, backup), runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "b1b2", text, "the failed primary's delta was held, never forwarded")
	assert.Equal(t, "backup", resp.Model)

	// The same race under first_delta commits to the primary's first delta.
	primary, backup = mk()
	text, _, err = rt.Collect(context.Background(),
		build(t, `{"models":["primary","backup"],"delay":"1h"}`, primary, backup), runtime.ChatRequest{}, 0)
	require.Error(t, err)
	assert.Equal(t, "p1", text)
	assert.Zero(t, backup.Calls())
}

func TestFirstSuccessWaitsForTheEnd(t *testing.T) {
	rt.CheckGoroutines(t)
	// The primary delivers but never finishes; the backup answers once the race has
	// taken the primary's delta (however late a loaded machine runs the primary), and
	// finishes.
	primary := rt.NewModel(rt.Response{Deltas: []string{"p"}, Hang: true})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b1", "b2"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2}})
	delivered := make(chan struct{})
	var once sync.Once
	first := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		return primary.Stream(ctx, req, func(d runtime.Delta) bool {
			ok := yield(d)
			once.Do(func() { close(delivered) })
			return ok
		})
	})
	second := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		select {
		case <-delivered:
		case <-ctx.Done():
			return ctx.Err()
		}
		return backup.Stream(ctx, req, yield)
	})
	text, resp, err := rt.Collect(context.Background(),
		buildClients(t, `{"models":["primary","backup"],"delay":"5ms","win":"first_success"}`, first, second), runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "b1b2", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, int64(2), resp.Usage.OutputTokens)
	assert.Equal(t, 1, primary.Calls())
}

func TestFirstSuccessAllFail(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"p"}, Err: rt.Transient("primary broke"), FailAfter: 1})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}, Err: rt.Transient("backup broke"), FailAfter: 1})
	text, _, err := rt.Collect(context.Background(),
		build(t, `{"models":["primary","backup"],"delay":"1h","win":"first_success"}`, primary, backup), runtime.ChatRequest{}, 0)
	require.ErrorContains(t, err, "backup broke")
	assert.Empty(t, text)
}

func TestWinValidates(t *testing.T) {
	known, err := runtime.ValidateConfig("hedge", []byte(`{"models":["a","b"],"win":"fastest"}`))
	assert.True(t, known)
	assert.ErrorContains(t, err, `win must be "first_delta" or "first_success"`)
}

// refusing returns a model that fails with err, and one that delivers "p"
// only once the race has taken that refusal (the refuser's context ends then,
// see afterFailure) or its own call is cancelled.
func refusing(err error) (refuser, waiting runtime.ModelClient) {
	refused := make(chan struct{})
	refuser = runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, _ func(runtime.Delta) bool) error {
		go func() {
			<-ctx.Done()
			close(refused)
		}()
		return err
	})
	waiting = runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		select {
		case <-refused:
		case <-ctx.Done():
			return ctx.Err()
		}
		yield(runtime.Delta{Text: "p"})
		return nil
	})
	return refuser, waiting
}

func TestABlockOrBudgetEndsTheRace(t *testing.T) {
	for name, refusal := range map[string]error{
		"blocked": &runtime.BlockedError{Layer: "guard", Message: "no"},
		"budget":  &runtime.BudgetError{Layer: "meter", Resource: "usd", Spent: 5, Limit: 5},
	} {
		t.Run(name+" racer", func(t *testing.T) {
			rt.CheckGoroutines(t)
			backup, primary := refusing(refusal)
			text, _, err := rt.Collect(context.Background(), buildClients(t, `{"models":["primary","backup"],"delay":"5ms"}`, primary, backup),
				runtime.ChatRequest{}, 0)
			assert.Empty(t, text, "another model's answer does not bypass the refusal")
			assert.Equal(t, runtime.Classify(refusal), runtime.Classify(err), "%v", err)
		})
		t.Run(name+" first model", func(t *testing.T) {
			rt.CheckGoroutines(t)
			primary := rt.NewModel(rt.Response{Err: refusal})
			backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
			text, _, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1h"}`, primary, backup),
				runtime.ChatRequest{}, 0)
			assert.Empty(t, text)
			assert.Equal(t, runtime.Classify(refusal), runtime.Classify(err), "%v", err)
			assert.Zero(t, backup.Calls(), "no model is started after a refusal")
		})
	}
}

// reporting is a model client that reports its request and model as a
// provider client does, waits for gate, then answers (or waits for its
// context's end when it has no answer).
type reporting struct {
	name, answer string
	reported     chan struct{}
	gate         <-chan struct{}
}

func (m *reporting) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	runtime.ReportServedModel(ctx, m.name)
	runtime.ReportUpstreamRequestID(ctx, "req-"+m.name)
	close(m.reported)
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.answer == "" {
		<-ctx.Done()
		return ctx.Err()
	}
	yield(runtime.Delta{Text: m.answer, FinishReason: runtime.FinishStop})
	return nil
}

// The caller hears the request id and the model of the racer whose answer
// it got, not those of a loser that sent its request later.
func TestTheWinnersRequestIsReported(t *testing.T) {
	rt.CheckGoroutines(t)
	backup := &reporting{name: "backup", reported: make(chan struct{})}
	primary := &reporting{name: "primary", answer: "p", reported: make(chan struct{}), gate: backup.reported}
	n := &rt.Notes{}
	ctx := runtime.WithUpstreamRequestID(context.Background(), n)
	text, _, err := rt.Collect(ctx, buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, backup),
		runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "p", text)
	assert.Equal(t, []string{"req-primary"}, n.IDs(), "the loser's request id is not the call's")
	assert.Equal(t, []string{"primary"}, n.Served())
}

// TestAStreamingToolCallWinsTheRace: the runtime holds the fragments of a
// request that offers tools until the answer ends, below the hedge, so a
// primary streaming a call delivered nothing to it before the delay: the
// backup was started (and billed) for every answer of calls alone longer
// than the delay. A fragment's arrival from the model client wins the
// race, the call still going up whole at the end.
func TestAStreamingToolCallWinsTheRace(t *testing.T) {
	rt.CheckGoroutines(t)
	backupCalled := make(chan struct{})
	var backupCalls atomic.Int64
	primary := runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if !yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "p1", Name: "lookup", Arguments: `{"q":`}}}) {
			return nil
		}
		select {
		case <-backupCalled:
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}, FinishReason: runtime.FinishToolCalls})
		return nil
	})
	backup := runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if backupCalls.Add(1) == 1 {
			close(backupCalled)
		}
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "b1", Name: "lookup", Arguments: `{"q":"Paris"}`}}, FinishReason: runtime.FinishToolCalls})
		return nil
	})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"20ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: []runtime.ToolDef{{Name: "lookup", Parameters: []byte(`{"type":"object"}`)}}})
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Model)
	assert.Zero(t, backupCalls.Load(), "the backup is not started: the primary was streaming its call")
	require.Len(t, resp.ToolCalls, 1)
	assert.Equal(t, "p1", resp.ToolCalls[0].ID)
}

// A provider that refused a call refuses it again: a hedge that lists the
// model twice (to race it against itself) does not ask it again after its
// refusal, but goes on to the next model it lists, at once.
func TestARefusedModelIsNotAskedAgain(t *testing.T) {
	rt.CheckGoroutines(t)
	refusal := runtime.ProviderRefused(rt.Permanent("invalid api key"))
	primary := rt.NewModel(rt.Response{Err: refusal}, rt.Response{Err: refusal})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","primary","backup"],"delay":"1h"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "b", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, 1, primary.Calls(), "the refused model is not raced again")

	primary = rt.NewModel(rt.Response{Err: refusal}, rt.Response{Err: refusal})
	_, _, err = rt.Collect(context.Background(), build(t, `{"models":["primary","primary"],"delay":"1h"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.ErrorIs(t, err, runtime.ErrProviderRefused, "no model is left: the call fails with the refusal")
	assert.Equal(t, 1, primary.Calls())
}

// A model that failed otherwise (a permanent error of its own) is raced
// again where the hedge lists it again: the failure is the request's, not
// its provider's refusal of every call.
func TestAFailedModelListedTwiceRacesAgain(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Err: rt.Permanent("overloaded")}, rt.Response{Deltas: []string{"p"}})
	text, _, err := rt.Collect(context.Background(), build(t, `{"models":["primary","primary"],"delay":"1h"}`, primary, rt.NewModel()),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "p", text)
	assert.Equal(t, 2, primary.Calls())
}
