package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRunAgentOutputRefusedByTheTurnChain: a turn chain's content_filter
// or after-phase guard that refuses the turn's output ends the turn with
// the *BlockedError; the result must not carry the refused text.
func TestRunAgentOutputRefusedByTheTurnChain(t *testing.T) {
	for name, layer := range map[string]plan.Layer{
		"content_filter": rt.Layer("content_filter", `{"keywords":["acct 1234"]}`),
		"guard":          rt.Layer("guard", `{"deny":"output.text.contains(\"acct 1234\")","phase":"after"}`),
	} {
		t.Run(name, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Deltas: []string{"your acct 1234 is open"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{layer}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "status?"})
			require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
			assert.NotContains(t, res.Output, "acct 1234")
			for _, m := range res.Messages {
				assert.NotContains(t, m.Text(), "acct 1234")
			}
		})
	}
}

// TestRunAgentOutputRefusedAtMaxSteps: the output of a turn ended by its
// step bound is the text of its last answer, which also called tools: a
// refusal withholds the text and keeps the calls and their results.
func TestRunAgentOutputRefusedAtMaxSteps(t *testing.T) {
	d := runtime.Delta{Text: "acct 1234: checking", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "echo", Arguments: `{}`}}}
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{d}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("content_filter", `{"keywords":["acct 1234"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Tools: map[string]runtime.ToolFunc{"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { return "ok", nil }}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go", MaxSteps: 1})
	require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
	assert.Empty(t, res.Output)
	require.Len(t, res.Messages, 3)
	assert.Empty(t, res.Messages[1].Text())
	assert.Len(t, res.Messages[1].ToolCalls, 1)
	assert.Equal(t, "x", res.Messages[2].ToolCallID)
}

// TestRunAgentFailedTurnHasNoOutput: the text of a turn that failed was
// never checked by the turn chain's after-phase layers: it is not the
// output (the transcript so far still holds it).
func TestRunAgentFailedTurnHasNoOutput(t *testing.T) {
	d := runtime.Delta{Text: "acct 1234: refunding", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "refund", Arguments: `{}`}}}
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{d}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("content_filter", `{"keywords":["acct 1234"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
				return nil, &runtime.InDoubtError{Layer: "bank", Tool: "refund"}
			}}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
	require.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
	assert.Empty(t, res.Output)
	require.Len(t, res.Messages, 2)
	assert.Len(t, res.Messages[1].ToolCalls, 1)
}

// TestRunAgentMalformedCalls: arguments that are not a JSON object, a
// missing name, a huge index: refused as error results, never a panic.
func TestRunAgentMalformedCalls(t *testing.T) {
	d := runtime.Delta{FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{
		{Index: 1 << 30, ID: "a", Name: "echo", Arguments: `[1]`},
		{Index: -5, Name: "echo", Arguments: `"s"`},
		{Index: 3, ID: "c", Name: "", Arguments: `{}`},
		{Index: 4, ID: "d", Name: "echo", Arguments: `{"a":`},
		{Index: 5, ID: "e", Name: "Echo", Arguments: `{}`},
		{Index: 6, ID: "f", Name: "echo", Arguments: `null`},
		{Index: 7, ID: "g", Name: "echo", Arguments: `{"a":1}{"b":2}`},
	}}
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{d}}, rt.Response{Deltas: []string{"ok"}})
	var ran int
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { ran++; return c.Args, nil }}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
	require.NoError(t, err)
	assert.Equal(t, 0, ran)
	for _, m := range res.Messages {
		if m.Role == "tool" {
			assert.True(t, m.Parts[0].IsError, m.Parts[0].Text)
			assert.True(t, strings.HasPrefix(m.Parts[0].Text, "error"), m.Parts[0].Text)
		}
	}
}

// TestRunAgentRepeatOfAnUndeclaredTool: a tool the policy does not declare
// (allowed by settings.allow_undeclared_tools) has nothing saying it is
// free of effect: called twice with the same arguments in one answer, it
// runs once, as a declared side-effecting tool does.
func TestRunAgentRepeatOfAnUndeclaredTool(t *testing.T) {
	for name, args := range map[string]string{"host tool": "", "args from Deps.ToolArgs": `{"type":"object"}`} {
		t.Run(name, func(t *testing.T) {
			model := rt.NewModel(callTools(use("a", "transfer", `{"to":"x","amount":100}`), use("b", "transfer", `{"amount":100,"to":"x"}`)),
				rt.Response{Deltas: []string{"done"}})
			var ran int
			p := rt.Plan(plan.Chains{})
			p.Settings.AllowUndeclaredTools = true
			deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"transfer": func(context.Context, *runtime.ToolCall) (any, error) { ran++; return "sent", nil }}}
			if args != "" {
				deps.ToolArgs = map[string]json.RawMessage{"transfer": json.RawMessage(args)}
			}
			pl := rt.Build(t, p, deps)
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "pay x 100", MaxParallel: 1})
			require.NoError(t, err)
			assert.Equal(t, 1, ran)
			assert.Contains(t, answers(res.Messages)[1], "b=error: not run: this call repeats call a")
		})
	}
}

// TestRunAgentParallelCallsHoldToARunBudget: a model that asks for more
// calls in one answer than the run's budget of calls allows gets no more
// than the budget, however many run at once. A call refused while the
// admitted ones still run is refused for the calls in flight, which is not
// final (the model reads the refusal and the turn goes on); one refused
// once both are charged ends the turn over budget.
func TestRunAgentParallelCallsHoldToARunBudget(t *testing.T) {
	var calls []runtime.ToolUse
	for i := range 6 {
		calls = append(calls, use(fmt.Sprint("c", i), "pay", fmt.Sprintf(`{"n":%d}`, i)))
	}
	model := rt.NewModel(callTools(calls...), rt.Response{Deltas: []string{"done"}})
	var ran atomic.Int32
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":2},"scope":"run"}`)}})
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"pay": func(context.Context, *runtime.ToolCall) (any, error) {
			ran.Add(1)
			time.Sleep(5 * time.Millisecond)
			return "paid", nil
		}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "budget"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "pay all", MaxParallel: 6})
	if err != nil {
		require.Equal(t, runtime.ClassBudget, runtime.Classify(err), "%v", err)
	} else {
		results := fmt.Sprint(answers(res.Messages))
		assert.Equal(t, 2, strings.Count(results, "=paid"), results)
		assert.Equal(t, 4, strings.Count(results, "held by calls in flight"), "the refused calls are the model's to read: %s", results)
	}
	assert.Equal(t, int32(2), ran.Load())
}

// TestRunAgentRunsOnlyOfferedTools: a turn that offers the model some of
// the declared tools (Params.Tools), or none (ToolChoice "none"), runs no
// call to another: a model that calls a tool it was not offered (an
// injection naming the refund tool of a read-only turn) gets an error
// result, and the tool does not run.
func TestRunAgentRunsOnlyOfferedTools(t *testing.T) {
	for name, params := range map[string]runtime.ChatRequest{
		"tools":        {Tools: []runtime.ToolDef{{Name: "lookup"}}},
		"no tools":     {Tools: []runtime.ToolDef{}},
		"choice none":  {ToolChoice: "none"},
		"choice named": {ToolChoice: "lookup"},
	} {
		t.Run(name, func(t *testing.T) {
			model := rt.NewModel(callTools(use("a", "refund", `{"order":7}`)), rt.Response{Deltas: []string{"done"}})
			tools, made := countingTools(0)
			pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "status of 7", Params: params})
			require.NoError(t, err)
			assert.Empty(t, made())
			require.Len(t, answers(res.Messages), 1)
			assert.Contains(t, answers(res.Messages)[0], "a=error")
		})
	}
}

// TestRunAgentEarlierAnswerTextRefusedByTheTurnChain: the text an earlier
// answer wrote beside its tool calls reaches the host in the transcript as
// the output does: a turn chain's content_filter or after-phase guard
// reads it, and a refusal ends the turn with the *BlockedError and
// withholds every answer's text of the turn from the result, the recorded
// transcript and the checkpoint's version, the calls and their results
// kept.
func TestRunAgentEarlierAnswerTextRefusedByTheTurnChain(t *testing.T) {
	for name, layer := range outputFilters() {
		t.Run(name, func(t *testing.T) {
			pl, store := checkingTurn(t, layer, rt.Response{Deltas: []string{"all fine"}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "status?"})
			require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
			assert.Empty(t, res.Output)
			require.Len(t, res.Messages, 3, "the refused final answer goes, the calling one stays")
			assert.Len(t, res.Messages[1].ToolCalls, 1)
			assert.Equal(t, "x", res.Messages[2].ToolCallID)
			for _, m := range res.Messages {
				assert.NotContains(t, m.Text(), "acct 1234")
				assert.NotContains(t, m.Text(), "all fine")
			}
			assertNotRecorded(t, ctx, pl, store, "acct 1234")
		})
	}
}

// assertNotRecorded asserts that neither the run's recorded transcript nor
// its latest checkpoint holds text.
func assertNotRecorded(t *testing.T, ctx context.Context, pl *runtime.Pipeline, store runtime.CheckpointStore, text string) {
	t.Helper()
	transcript := pl.Transcript(ctx)
	require.NotEmpty(t, transcript)
	for _, m := range transcript {
		assert.NotContains(t, m.Text(), text)
	}
	cp, ok, err := store.LatestCheckpoint(context.Background(), runtime.RunOf(ctx).ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotEmpty(t, cp.Transcript)
	for _, m := range cp.Transcript {
		assert.NotContains(t, m.Text(), text)
	}
}

// TestTurnEarlierTextsOfAHostsTurn: a host that runs its own turn and
// shows its user more than the output hands those texts to the turn chain
// (AddEarlier): a content_filter reads them as it reads the output.
func TestTurnEarlierTextsOfAHostsTurn(t *testing.T) {
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("content_filter", `{"keywords":["acct 1234"]}`)}}), runtime.Deps{})
	body := func(earlier ...string) runtime.TurnFunc {
		return func(ctx context.Context) (string, error) {
			for _, text := range earlier { // each call adds
				runtime.AddEarlier(ctx, []string{text})
			}
			return "all fine", nil
		}
	}
	_, err := pl.Turn(context.Background(), runtime.TurnRequest{Input: "status?"}, body("looking up acct 1234", "then the balance"))
	require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
	res, err := pl.Turn(context.Background(), runtime.TurnRequest{Input: "status?"}, body("looking up"))
	require.NoError(t, err)
	assert.Equal(t, "all fine", res.Output)
	runtime.AddEarlier(context.Background(), []string{"x"}) // outside a turn: nothing
}

// TestRunAgentFailedTurnsEarlierTextRefused: a turn that fails on a model
// call that may succeed again (not blocked, over budget or in doubt) hands
// the host, and a checkpoint, a transcript holding the text its answers
// wrote: the turn chain's content_filter and after-phase guard read it,
// and a refusal ends the turn with the *BlockedError and withholds it.
func TestRunAgentFailedTurnsEarlierTextRefused(t *testing.T) {
	for name, layer := range outputFilters() {
		t.Run(name, func(t *testing.T) {
			pl, store := checkingTurn(t, layer, rt.Response{Err: rt.Permanent("the model is down")})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "status?"})
			require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
			require.Len(t, res.Messages, 3)
			assert.Len(t, res.Messages[1].ToolCalls, 1)
			for _, m := range res.Messages {
				assert.NotContains(t, m.Text(), "acct 1234")
			}
			assertNotRecorded(t, ctx, pl, store, "acct 1234")
		})
	}
}

// outputFilters are the turn chain layers that read a turn's texts, each
// refusing "acct 1234".
func outputFilters() map[string]plan.Layer {
	return map[string]plan.Layer{
		"content_filter": rt.Layer("content_filter", `{"keywords":["acct 1234"]}`),
		"guard":          rt.Layer("guard", `{"deny":"output.text.contains(\"acct 1234\")","phase":"after"}`),
	}
}

// checkingTurn builds a pipeline whose turn chain is a checkpoint outside
// layer, whose model first writes "acct 1234: checking" beside a call to
// echo, then answers then.
func checkingTurn(t *testing.T, layer plan.Layer, then rt.Response) (*runtime.Pipeline, runtime.CheckpointStore) {
	d := runtime.Delta{Text: "acct 1234: checking", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "echo", Arguments: `{}`}}}
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{d}}, then)
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), layer}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
			Tools: map[string]runtime.ToolFunc{"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
	return pl, store
}
