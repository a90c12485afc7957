package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// callTools is a model response that asks for the tool calls.
func callTools(calls ...runtime.ToolUse) rt.Response {
	d := runtime.Delta{FinishReason: runtime.FinishToolCalls}
	for i, c := range calls {
		d.ToolCalls = append(d.ToolCalls, runtime.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
	}
	return rt.Response{Stream: []runtime.Delta{d}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}}
}

func use(id, name, args string) runtime.ToolUse {
	return runtime.ToolUse{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func TestRunAgentLoopsUntilTheModelAnswers(t *testing.T) {
	model := rt.NewModel(
		callTools(use("c1", "weather", `{"city":"Paris"}`), use("c2", "weather", `{"city":"Tokyo"}`)),
		rt.Response{Deltas: []string{"Paris 21, ", "Tokyo 25"}, Usage: runtime.Usage{InputTokens: 30, OutputTokens: 7}},
	)
	var running, peak atomic.Int32
	weather := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return map[string]any{"city": c.Args["city"], "temp_c": 21}, nil
	}
	audit := &runtime.MemoryAudit{}
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{{Use: "audit", Config: json.RawMessage(`{}`)}}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"weather": weather}, Audit: audit})

	var steps []int
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{
		Model: "primary", Messages: []runtime.Message{{Role: "system", Content: "weather bot"}}, Input: "weather in Paris and Tokyo?",
		OnDelta: func(step int, _ runtime.Delta) { steps = append(steps, step) },
	})
	require.NoError(t, err)
	assert.Equal(t, "Paris 21, Tokyo 25", res.Output)
	assert.Equal(t, runtime.StopDone, res.Stop)
	assert.Equal(t, 2, res.Steps)
	assert.Equal(t, 2, res.ToolCalls)
	assert.Equal(t, runtime.Usage{InputTokens: 40, OutputTokens: 12}, res.Usage)
	assert.Equal(t, int32(2), peak.Load(), "the two calls of a step run at once")
	assert.Equal(t, []int{1, 2, 2}, steps)

	require.Len(t, res.Messages, 6)
	assert.Equal(t, []string{"system", "user", "assistant", "tool", "tool", "assistant"},
		[]string{res.Messages[0].Role, res.Messages[1].Role, res.Messages[2].Role, res.Messages[3].Role, res.Messages[4].Role, res.Messages[5].Role})
	assert.Len(t, res.Messages[2].ToolCalls, 2)
	assert.Equal(t, "c1", res.Messages[3].ToolCallID)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c2", Text: `{"city":"Tokyo","temp_c":21}`}}, res.Messages[4].Parts)

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	assert.Len(t, reqs[0].Messages, 2)
	assert.Len(t, reqs[1].Messages, 5, "the second call sees the tool results")

	var turns int
	for _, r := range audit.Records() {
		if r.Stage == "turn" && r.Phase == runtime.PhaseOutcome {
			turns++
			assert.Equal(t, runtime.DecisionOK, r.Decision)
		}
	}
	assert.Equal(t, 1, turns, "the whole loop is one turn of the turn chain")
}

func TestRunAgentBoundsParallelTools(t *testing.T) {
	model := rt.NewModel(callTools(use("a", "slow", `{}`), use("b", "slow", `{}`), use("c", "slow", `{}`)), rt.Response{Deltas: []string{"ok"}})
	var running, peak atomic.Int32
	slow := func(context.Context, *runtime.ToolCall) (any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		return "done", nil
	}
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"slow": slow}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go", MaxParallel: 1})
	require.NoError(t, err)
	assert.Equal(t, int32(1), peak.Load())
	assert.Equal(t, 3, res.ToolCalls)
}

func TestRunAgentStopsAtMaxSteps(t *testing.T) {
	model := rt.NewModel(callTools(use("x", "echo", `{"n":1}`)))
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { return c.Args, nil }}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "loop", MaxSteps: 3})
	require.NoError(t, err)
	assert.Equal(t, runtime.StopMaxSteps, res.Stop)
	assert.Equal(t, 3, res.Steps)
	assert.Equal(t, 3, model.Calls())
}

func TestRunAgentReportsToolFailuresToTheModel(t *testing.T) {
	model := rt.NewModel(callTools(use("bad", "echo", `[1,2]`), use("gone", "missing", `{}`), use("boom", "fail", `{}`)), rt.Response{Deltas: []string{"sorry"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{
			"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { return c.Args, nil },
			"fail": func(context.Context, *runtime.ToolCall) (any, error) { return nil, errors.New("disk full") },
		}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "try"})
	require.NoError(t, err)
	assert.Equal(t, "sorry", res.Output)
	results := res.Messages[2:5]
	for _, m := range results {
		require.Len(t, m.Parts, 1)
		assert.True(t, m.Parts[0].IsError)
	}
	assert.Contains(t, results[0].Parts[0].Text, "not a JSON object")
	assert.Contains(t, results[1].Parts[0].Text, `tool "missing" is not registered`)
	assert.Contains(t, results[2].Parts[0].Text, "disk full")
}

func TestRunAgentEndsOnAFailedModelCall(t *testing.T) {
	model := rt.NewModel(rt.Response{Err: &runtime.CallError{Kind: runtime.KindPermanent, Message: "bad request"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "hi"})
	assert.ErrorContains(t, err, "bad request")
	assert.Equal(t, "", res.Stop)
	assert.Equal(t, 1, res.Steps)
	_, err = pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", OnBlock: "ignore"})
	assert.ErrorContains(t, err, `on_block "ignore" is not "tell_model" or "end_turn"`)
}

// TestRunAgentInDoubtOutlivesACancellation: a call that ends in doubt (or
// ran with its outcome not recorded) while the turn's context is cancelled
// is left unanswered and the turn ends in doubt, as without the
// cancellation, instead of telling the model "cancelled" of a refund that
// may have been made.
func TestRunAgentInDoubtOutlivesACancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"in doubt", &runtime.InDoubtError{Layer: "idem", Tool: "refund", IdempotencyKey: "k"}},
		{"outcome unrecorded", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "audit", Message: "audit outcome not written",
			Err: runtime.ErrOutcomeUnrecorded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"unused"}})
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					cancel()
					return nil, tc.err
				}}})
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
			last := res.Messages[len(res.Messages)-1]
			assert.Equal(t, "assistant", last.Role, "the call is left unanswered for a person to settle")
		})
	}
}

// A tool that panics in an agent turn runs on a goroutine of RunAgent's: its
// panic is raised again on the caller's goroutine, where the host can recover
// it, once the step's other calls have finished, instead of ending the
// process.
func TestRunAgentRaisesAToolPanicOnTheCallersGoroutine(t *testing.T) {
	rt.CheckGoroutines(t)
	model := rt.NewModel(callTools(use("c1", "boom", `{}`), use("c2", "lookup", `{}`)), rt.Response{Deltas: []string{"never"}})
	lookup := rt.NewTool(rt.ToolResult{Value: "found"})
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{
			"boom":   func(context.Context, *runtime.ToolCall) (any, error) { panic("tool exploded") },
			"lookup": lookup.Func(),
		}})
	assert.PanicsWithValue(t, "tool exploded", func() {
		_, _ = pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
	})
	assert.Equal(t, 1, lookup.Calls(), "the step's other call ran to its end")
	assert.Equal(t, 1, model.Calls(), "the turn did not go on")
}

// A side-effecting tool (not retry_safe) that was running when the turn was
// cancelled may have made its effect before it stopped. The turn used to
// answer it "error: cancelled" and end as cancelled (a failure a worker
// redelivers, a transcript that invites the model to make it again); the
// call is in doubt: left unanswered, recorded in doubt, the turn's error
// final. A read-only tool, a retry_safe one and a call cancelled before it
// reached its tool are answered "cancelled" as before.
func TestRunAgentCancelledWhileASideEffectingToolRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tool  plan.Tool
		reach bool
		doubt bool
	}{
		{"side-effecting", plan.Tool{SideEffecting: true}, true, true},
		{"retry_safe", plan.Tool{SideEffecting: true, RetrySafe: true}, true, false},
		{"read-only", plan.Tool{}, true, false},
		{"not reached", plan.Tool{SideEffecting: true}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r1"}))
			defer cancel()
			model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"unused"}})
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": tc.tool}
			var ran atomic.Int32
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"refund": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
					ran.Add(1)
					cancel()
					return nil, ctx.Err()
				}}})
			if !tc.reach {
				// A read-only lookup, first, cancels: the refund's
				// context has ended before it starts.
				model = rt.NewModel(callTools(use("l1", "lookup", `{}`), use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"unused"}})
				p.Tools["lookup"] = plan.Tool{}
				pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Tools: map[string]runtime.ToolFunc{
						"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) { cancel(); return nil, ctx.Err() },
						"refund": func(context.Context, *runtime.ToolCall) (any, error) { ran.Add(1); return "refunded", nil },
					}})
			}
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxParallel: 1})
			require.ErrorIs(t, err, context.Canceled)
			last := res.Messages[len(res.Messages)-1]
			if tc.doubt {
				assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
				assert.True(t, errors.Is(err, runtime.ErrMayHaveRun))
				assert.Equal(t, "assistant", last.Role, "the call is left unanswered for a person to settle")
				return
			}
			assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "%v", err)
			assert.Equal(t, "tool", last.Role)
			assert.Equal(t, "error: cancelled", last.Parts[0].Text)
			if !tc.reach {
				assert.Zero(t, ran.Load())
			}
		})
	}
}

// TestRunAgentEndsOnATimedOutSideEffectingCall: a side-effecting tool, not
// retry_safe, that fails with a timeout (its own deadline, an upstream's
// 504) may have made its effect, as idempotent, meter and audit take it:
// the turn ends in doubt instead of telling the model it failed, which
// would have it make the refund again. A retry_safe tool's timeout, and a
// read-only one's, are told to the model.
func TestRunAgentEndsOnATimedOutSideEffectingCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tool  plan.Tool
		err   error
		doubt bool
	}{
		{"504", plan.Tool{SideEffecting: true}, &runtime.CallError{Status: 504, Message: "core gateway timeout"}, true},
		{"own deadline", plan.Tool{SideEffecting: true}, &runtime.CallError{Kind: runtime.KindTimeout, Message: "no answer within 5s"}, true},
		{"retry_safe", plan.Tool{SideEffecting: true, RetrySafe: true}, &runtime.CallError{Status: 504, Message: "gateway timeout"}, false},
		{"read-only", plan.Tool{}, &runtime.CallError{Status: 504, Message: "gateway timeout"}, false},
		{"not run", plan.Tool{SideEffecting: true}, runtime.NotRun(&runtime.CallError{Status: 504, Message: "connect timeout"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), callTools(use("r2", "refund", `{"order":7}`)),
				rt.Response{Deltas: []string{"done"}})
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": tc.tool}
			var calls atomic.Int64
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					if calls.Add(1) == 1 {
						return nil, tc.err
					}
					return "refunded", nil
				}}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
			if !tc.doubt {
				require.NoError(t, err)
				assert.Equal(t, int64(2), calls.Load(), "told the model, which called again")
				return
			}
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
			assert.Equal(t, int64(1), calls.Load(), "the refund is not made again")
			last := res.Messages[len(res.Messages)-1]
			assert.Equal(t, "assistant", last.Role, "the call is left unanswered for a person to settle")
		})
	}
}

// An agent turn's Usage is what its model calls billed: an attempt a retry
// layer of the chat chain discarded from the response's usage was made and
// billed, so the turn counts it, as the meter does.
func TestAgentUsageCountsDiscardedAttempts(t *testing.T) {
	attempts := 0
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		attempts++
		if attempts == 1 {
			return &runtime.CallError{Kind: runtime.KindTransient, Message: "overloaded", Usage: runtime.Usage{InputTokens: 100}}
		}
		yield(runtime.Delta{Text: "done", FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 100, OutputTokens: 5}})
		return nil
	})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("meter", ""), rt.Layer("retry", `{"max_attempts": 3, "initial_delay": "1ms"}`)}},
		map[string]runtime.ModelClient{"primary": model})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "go"})
	require.NoError(t, err)
	assert.Equal(t, 2, attempts)
	assert.Equal(t, runtime.Usage{InputTokens: 200, OutputTokens: 5}, res.Usage, "both attempts were billed")
	got := meterOf(t, pl).Ledger("r")
	assert.Equal(t, int64(res.Usage.InputTokens), got.InputTokens, "the turn's usage agrees with the meter")
}

// TestRunAgentTellsTheModelACallRan: a call that ran but whose result
// cannot be used (runtime.Ran: a result output_coerce refused, one over a
// size limit) is not told to the model as a failure, which would invite it
// to make the call again and repeat its effect.
func TestRunAgentTellsTheModelACallRan(t *testing.T) {
	model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"done"}})
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			return nil, runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: "coerce", Message: "result is off its schema"})
		}}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	part := res.Messages[2].Parts[0]
	assert.True(t, part.IsError)
	assert.Equal(t, "error: the tool ran (its effects happened) but its result could not be used: coerce: result is off its schema. "+
		"Do not call it again to retry: that would repeat its effects.", part.Text)
}
