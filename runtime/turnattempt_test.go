package runtime_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// turnAgain is a host's turn layer that runs the layers inside it once
// more when they fail other than final (a retry of the host's own).
type turnAgain struct{}

func (*turnAgain) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		out, err := next(ctx, c)
		if err != nil && !runtime.Classify(err).Final() {
			return next(ctx, c)
		}
		return out, err
	}
}

// endsKey carries the log of the turnEnd layers' end functions.
type endsKey struct{}

type endsLog struct {
	mu  sync.Mutex
	ran []string
}

// turnEnd is a host's turn layer that asks, once its inner layers
// returned, to log at the turn's end its tag and the output it saw.
type turnEnd struct {
	Tag string `json:"tag"`
}

func (e *turnEnd) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		out, err := next(ctx, c)
		log := ctx.Value(endsKey{}).(*endsLog)
		seen := e.Tag + ":" + out
		c.AtEnd(func(error) error {
			log.mu.Lock()
			defer log.mu.Unlock()
			log.ran = append(log.ran, seen)
			return nil
		})
		return out, err
	}
}

// turnFlaky is a host's turn layer that fails its first turn after its
// inner layers returned, as a check of its own that failed for a moment.
type turnFlaky struct{ failed bool }

func (f *turnFlaky) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		out, err := next(ctx, c)
		if err == nil && !f.failed {
			f.failed = true
			return "", &runtime.CallError{Kind: runtime.KindTransient, Message: "check unavailable"}
		}
		return out, err
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "test.turn_flaky", Stages: []plan.Stage{plan.StageTurn},
		New: func() runtime.Middleware { return &turnFlaky{} }})
	runtime.Register(runtime.Module{ID: "test.turn_again", Stages: []plan.Stage{plan.StageTurn},
		New: func() runtime.Middleware { return &turnAgain{} }})
	runtime.Register(runtime.Module{ID: "test.turn_end", Stages: []plan.Stage{plan.StageTurn}, ConfigSchema: "tag: string",
		New: func() runtime.Middleware { return &turnEnd{} }})
}

// TestTurnEndsOfAnAbandonedAttempt: a layer that runs the layers inside it
// again (a host's retry) abandons their first attempt, but what they asked
// to do at the turn's end (TurnCall.AtEnd) during it still ran: the same
// end twice, one of them with the failed attempt's outcome, and a
// checkpoint inside saved the run once per attempt. Only the ends of the
// attempt that returned run now; those of the layers outside it are kept.
func TestTurnEndsOfAnAbandonedAttempt(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{
		rt.Layer("test.turn_end", `{"tag":"outer"}`),
		rt.Layer("test.turn_again", `{}`),
		rt.Layer("checkpoint", `{}`),
		rt.Layer("test.turn_end", `{"tag":"inner"}`),
	}}), runtime.Deps{Checkpoints: store})
	log := &endsLog{}
	ctx := context.WithValue(runtime.WithRun(context.Background(), runtime.Run{ID: "r1"}), endsKey{}, log)
	attempts := 0
	res, err := pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) {
		attempts++
		if attempts == 1 {
			return "half", errors.New("upstream hiccup")
		}
		return "whole", nil
	})
	require.NoError(t, err)
	assert.Equal(t, "whole", res.Output)
	assert.Equal(t, 2, attempts)
	assert.Equal(t, []string{"inner:whole", "outer:whole"}, log.ran, "the abandoned attempt's end does not run")
	versions, err := store.CheckpointVersions(context.Background(), "r1")
	require.NoError(t, err)
	assert.Len(t, versions, 1, "one save, of the attempt that returned")
}

// TestAgentTurnAttemptRunsNoCallTwice: a layer that runs the turn chain's
// inner layers again (a host's retry of a turn whose model call failed)
// ran the agent loop from the start again: the refund the first attempt
// made ran again. An attempt continues the transcript the attempt before
// it left, as a resumed run does: the refund runs once, the model is asked
// again with its result.
func TestAgentTurnAttemptRunsNoCallTwice(t *testing.T) {
	var failed bool
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user":
			yield(runtime.Delta{Text: "refunding", FinishReason: runtime.FinishToolCalls,
				ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "r1", Name: "refund", Arguments: `{"order":7}`}}})
		case !failed:
			failed = true
			return &runtime.CallError{Kind: runtime.KindTransient, Message: "upstream hiccup"}
		default:
			yield(runtime.Delta{Text: "refunded"})
		}
		return nil
	})
	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, "refunded", res.Output)
	assert.Equal(t, map[string]int{"refund 7": 1}, made())
	require.Len(t, res.Messages, 4, "input, the calling answer, its result, the answer")
	assert.Equal(t, "refunding", res.Messages[1].Text())
	assert.Equal(t, "r1", res.Messages[2].ToolCallID)
	assert.Equal(t, res.Messages, pl.Transcript(ctx))
}

// TestAgentTurnAttemptAfterItsBodyReturned: an attempt after one whose
// body returned (a layer inside the retry failed then) returns what that
// body returned: the model is not asked again, no tool runs again.
func TestAgentTurnAttemptAfterItsBodyReturned(t *testing.T) {
	model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"refunded"}})
	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`), rt.Layer("test.turn_flaky", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, "refunded", res.Output)
	assert.Equal(t, 2, model.Calls())
	assert.Equal(t, map[string]int{"refund 7": 1}, made())
	assert.Len(t, res.Messages, 4)
}

// attemptModel answers a turn's input with a refund call, fails its next
// call once (a transient upstream failure), and then answers with calls of
// then, one an answer, before "refunded". Each answer reports 10 input and
// 5 output tokens.
func attemptModel(then ...runtime.ToolUse) runtime.ModelFunc {
	var failed bool
	var n int
	return runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		usage := runtime.Usage{InputTokens: 10, OutputTokens: 5}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user":
			yield(runtime.Delta{FinishReason: runtime.FinishToolCalls, Usage: usage,
				ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "r1", Name: "refund", Arguments: `{"order":7}`}}})
		case !failed:
			failed = true
			return &runtime.CallError{Kind: runtime.KindTransient, Message: "upstream hiccup"}
		case n < len(then):
			c := then[n]
			n++
			yield(runtime.Delta{FinishReason: runtime.FinishToolCalls, Usage: usage,
				ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}}})
		default:
			yield(runtime.Delta{Text: "refunded", Usage: usage})
		}
		return nil
	})
}

// TestAgentTurnAttemptsCountEveryModelCall: the result of a turn a host's
// retry ran again counted the last attempt's model calls alone, so a host
// billing from its usage left out what the earlier attempts spent. The
// counts (Usage, Steps, ToolCalls) are of every attempt: three model calls
// (the failed one included), the usage of the two that answered, the one
// tool call.
func TestAgentTurnAttemptsCountEveryModelCall(t *testing.T) {
	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": attemptModel()}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	var steps []int
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7",
		OnDelta: func(step int, _ runtime.Delta) { steps = append(steps, step) }})
	require.NoError(t, err)
	assert.Equal(t, "refunded", res.Output)
	assert.Equal(t, map[string]int{"refund 7": 1}, made())
	assert.Equal(t, runtime.Usage{InputTokens: 20, OutputTokens: 10}, res.Usage)
	assert.Equal(t, 3, res.Steps)
	assert.Equal(t, 1, res.ToolCalls)
	assert.Equal(t, []int{1, 3}, steps, "the steps of the attempt after go on from the calls made")
}

// TestAgentTurnAttemptsShareTheStepBound: each attempt of a turn a host's
// retry ran again had MaxSteps answers of its own, so a turn bounded to
// two answers made three. The answers of the earlier attempts count: the
// attempt after a first answer and a failed call makes one more.
func TestAgentTurnAttemptsShareTheStepBound(t *testing.T) {
	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{
		"primary": attemptModel(use("l1", "lookup", `{"order":7}`))}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxSteps: 2})
	require.NoError(t, err)
	assert.Equal(t, runtime.StopMaxSteps, res.Stop)
	assert.Equal(t, 3, res.Steps, "two answers and the failed call")
	assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 1}, made())
	assert.Equal(t, 2, res.ToolCalls)
}

// failingFirstSave is a checkpoint store whose first save fails (the store
// unavailable for a moment), the others pass.
type failingFirstSave struct {
	runtime.CheckpointStore
	saves atomic.Int32
}

func (s *failingFirstSave) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	if s.saves.Add(1) == 1 {
		return 0, errors.New("connection refused")
	}
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// turnAgainWithin is a host's turn layer that gives the layers inside it
// 100ms, and runs them once more, without that bound, when they fail other
// than final.
type turnAgainWithin struct{}

func (*turnAgainWithin) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		out, err := next(actx, c)
		cancel()
		if err != nil && !runtime.Classify(err).Final() {
			return next(ctx, c)
		}
		return out, err
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "test.turn_again_within", Stages: []plan.Stage{plan.StageTurn},
		New: func() runtime.Middleware { return &turnAgainWithin{} }})
}

// withinAttempts returns a pipeline of refundPlan under a turn_again_within
// layer, with model and a lookup tool whose first call outlives the
// attempt's deadline, the run's context and the count of the lookups.
func withinAttempts(t *testing.T, model runtime.ModelClient) (*runtime.Pipeline, context.Context, *atomic.Int32) {
	lookups := new(atomic.Int32)
	tools := map[string]runtime.ToolFunc{"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
		if lookups.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return "found", nil
	}}
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again_within", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	return pl, runtime.WithRun(context.Background(), runtime.Run{ID: "r1"}), lookups
}

// runAgentUnpanicked runs req, requiring that it neither panics nor fails.
func runAgentUnpanicked(t *testing.T, pl *runtime.Pipeline, ctx context.Context, req runtime.AgentRequest) runtime.AgentResult {
	t.Helper()
	var res runtime.AgentResult
	var err error
	require.NotPanics(t, func() { res, err = pl.RunAgent(ctx, req) })
	require.NoError(t, err)
	return res
}

// TestAgentTurnAttemptAfterADroppedAnswer: the save recording a model
// answer's calls before they run failed for a moment, so the answer left
// the transcript and the turn failed; a host's retry then ran the turn
// again. The dropped answer still counted towards MaxSteps and as the
// turn's first answer, so the attempt after, with no step left, asked
// nothing and panicked handing the turn chain the answers' text. The
// dropped answer counts for nothing: the model is asked again.
func TestAgentTurnAttemptAfterADroppedAnswer(t *testing.T) {
	model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"done"}})
	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools,
		Checkpoints: &failingFirstSave{CheckpointStore: runtime.NewMemoryCheckpoints()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	res := runAgentUnpanicked(t, pl, ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxSteps: 1})
	assert.Equal(t, runtime.StopDone, res.Stop)
	assert.Equal(t, "done", res.Output)
	assert.Equal(t, 2, model.Calls())
	assert.Empty(t, made(), "the refund of the dropped answer never ran")
	require.Len(t, res.Messages, 2, "the input and the answer")
	assert.Equal(t, "done", res.Messages[1].Text())
	assert.Equal(t, res.Messages, pl.Transcript(ctx))
}

// TestAgentTurnAttemptAtTheStepBound: the last step the turn may make
// called a tool that outlived the attempt's deadline; a host's retry ran
// the turn again, which had no step left, and panicked handing the turn
// chain the answers' text. It runs the lookup again (its "cancelled" was
// the attempt's) and ends at the bound, its output the last answer's
// text, as a turn that reached it in one attempt.
func TestAgentTurnAttemptAtTheStepBound(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{{Text: "looking", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "l1", Name: "lookup", Arguments: `{"order":7}`}}}}},
		rt.Response{Deltas: []string{"unused"}})
	pl, ctx, lookups := withinAttempts(t, model)
	res := runAgentUnpanicked(t, pl, ctx, runtime.AgentRequest{Model: "primary", Input: "look order 7 up", MaxSteps: 1})
	assert.Equal(t, runtime.StopMaxSteps, res.Stop)
	assert.Equal(t, "looking", res.Output)
	assert.Equal(t, 1, model.Calls())
	require.Len(t, res.Messages, 3, "the input, the answer, its call's result")
	assert.Equal(t, "l1", res.Messages[2].ToolCallID)
	assert.Equal(t, "found", res.Messages[2].Parts[0].Text, "the lookup the deadline cancelled ran again")
	assert.Equal(t, int32(2), lookups.Load())
	assert.Equal(t, res.Messages, pl.Transcript(ctx))
}

// TestAgentTurnAttemptKeepsTheInput: a resumed transcript's call (a
// lookup) outlived the attempt's deadline while it was settled, and a
// host's retry ran the turn again. The input, added once the calls are
// settled, was left out: the model answered the question before, and the
// transcript lacked the input and the message after the call. The attempt
// after adds them, after the lookup's result, which it runs again: its
// "cancelled" was the attempt's, not the turn's.
func TestAgentTurnAttemptKeepsTheInput(t *testing.T) {
	var seen []runtime.Message
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		seen = slices.Clone(req.Messages)
		yield(runtime.Delta{Text: "answer"})
		return nil
	})
	pl, ctx, lookups := withinAttempts(t, model)
	msgs := []runtime.Message{{Role: "user", Content: "q1"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{use("l1", "lookup", `{"order":7}`)}},
		{Role: "user", Content: "meanwhile"}}
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: msgs, Input: "q2"})
	require.NoError(t, err)
	assert.Equal(t, "answer", res.Output)
	require.Len(t, seen, 5, "q1, the call, its result, the message after it, the input")
	assert.Equal(t, "l1", seen[2].ToolCallID)
	assert.Equal(t, "found", seen[2].Parts[0].Text, "the lookup the deadline cancelled ran again")
	assert.Equal(t, int32(2), lookups.Load())
	assert.Equal(t, "meanwhile", seen[3].Content)
	assert.Equal(t, "q2", seen[4].Content)
	require.Len(t, res.Messages, 6)
	assert.Equal(t, seen, res.Messages[:5])
	assert.Equal(t, res.Messages, pl.Transcript(ctx))
}

// TestTurnAttemptsCountTheChainsAttempts: a turn a host's retry ran again
// reported one attempt (the count stamped by a retry of the chat or tool
// chains alone, which no layer of the turn chain stamps), though its body
// ran twice and the agent loop's second attempt continued the first's
// transcript. Attempts counts the turn chain's attempts: once, 1; run
// again, 2, for a host's turn, an agent turn and one whose attempt after
// returns what its body returned before.
func TestTurnAttemptsCountTheChainsAttempts(t *testing.T) {
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	again := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("test.turn_again", `{}`)}}), runtime.Deps{})
	res, err := again.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) { return "once", nil })
	require.NoError(t, err)
	assert.Equal(t, 1, res.Attempts, "a turn run once")
	failed := false
	res, err = again.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) {
		if !failed {
			failed = true
			return "", &runtime.CallError{Kind: runtime.KindTransient, Message: "upstream hiccup"}
		}
		return "twice", nil
	})
	require.NoError(t, err)
	assert.Equal(t, "twice", res.Output)
	assert.Equal(t, 2, res.Attempts, "a host's turn run again")

	tools, made := countingTools(0)
	p := refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`)}, p.Chains.Turn...)
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": attemptModel()}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	agent, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, "refunded", agent.Output)
	assert.Equal(t, map[string]int{"refund 7": 1}, made())
	assert.Equal(t, 2, agent.Attempts, "an agent turn whose model call failed, run again")
	agent, err = pl.RunAgent(runtime.WithRun(context.Background(), runtime.Run{ID: "r2"}), runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, 1, agent.Attempts, "an agent turn run once")

	model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"refunded"}})
	p = refundPlan()
	p.Chains.Turn = append([]plan.Layer{rt.Layer("test.turn_again", `{}`), rt.Layer("test.turn_flaky", `{}`)}, p.Chains.Turn...)
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	agent, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.NoError(t, err)
	assert.Equal(t, 2, model.Calls())
	assert.Equal(t, 2, agent.Attempts, "an agent turn whose body returned, run again by a layer that failed after it")
}
