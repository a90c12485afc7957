package runtime_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/fallback"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// cutAnswer is a model's answer whose call of lookup the upstream cut
// inside the arguments (in two fragments, as a stream carries them),
// ending with finish.
func cutAnswer(finish string) rt.Response {
	return rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "lookup", Arguments: `{"q":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"Par`}}},
		{FinishReason: finish},
	}}
}

// goodAnswer is the same call whole.
var goodAnswer = rt.Response{Stream: []runtime.Delta{
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c2", Name: "lookup", Arguments: `{"q":`}}},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}},
	{FinishReason: runtime.FinishToolCalls},
}}

var lookupTools = []runtime.ToolDef{{Name: "lookup", Parameters: []byte(`{"type":"object"}`)}}

// TestACutCallIsATransientFailureTheChainSees: a call whose arguments the
// upstream cut (not JSON at all) was handed up the chain as a call: a
// retry or a fallback never saw a failure, and the consumer got a call it
// cannot run. The chat terminal holds the calls of a request that offers
// tools until the stream ends and fails a cut one as the upstream's
// transient failure before any of it is delivered: a retry runs the
// model again, a fallback moves on, and without either the caller gets
// the failure; the consumer never sees a fragment of the cut call.
func TestACutCallIsATransientFailureTheChainSees(t *testing.T) {
	for name, tc := range map[string]struct {
		chain              []plan.Layer
		primary, backup    int
		fails              bool
		wantID, wantServed string
	}{
		"retry":    {chain: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}, primary: 2, wantID: "c2", wantServed: "primary"},
		"fallback": {chain: []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}, primary: 1, backup: 1, wantID: "b1", wantServed: "backup"},
		"neither":  {primary: 1, fails: true},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				m := rt.NewModel(cutAnswer(runtime.FinishToolCalls), goodAnswer)
				backup := rt.NewModel(rt.Response{Stream: []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "b1", Name: "lookup", Arguments: `{"q":"Paris"}`}}, FinishReason: runtime.FinishToolCalls}}})
				pl := rt.Build(t, rt.Plan(plan.Chains{Chat: tc.chain}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m, "backup": backup}})
				req := runtime.ChatRequest{Model: "primary", Tools: lookupTools}
				var resp runtime.ChatResponse
				var err error
				var seen []runtime.ToolCallDelta
				if stream {
					resp, err = pl.Stream(context.Background(), req, func(d runtime.Delta) bool {
						seen = append(seen, d.ToolCalls...)
						return true
					})
				} else {
					resp, err = pl.Complete(context.Background(), req)
					for _, c := range resp.ToolCalls {
						seen = append(seen, runtime.ToolCallDelta{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
					}
				}
				assert.Equal(t, tc.primary, m.Calls())
				assert.Equal(t, tc.backup, backup.Calls())
				if tc.fails {
					require.Error(t, err)
					assert.Equal(t, string(runtime.KindTransient), runtime.KindOf(err))
					assert.Contains(t, err.Error(), "lookup")
					assert.Contains(t, err.Error(), "not complete JSON")
					assert.Empty(t, seen, "no fragment of the cut call is delivered")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.wantServed, resp.Model)
				assert.Equal(t, runtime.FinishToolCalls, resp.FinishReason)
				require.Len(t, seen, 1, "the call goes out whole, the cut one not at all")
				assert.Equal(t, tc.wantID, seen[0].ID)
				assert.JSONEq(t, `{"q":"Paris"}`, seen[0].Arguments)
			})
		}
	}
}

// TestACutCallAfterDeliveredTextIsCommitted: text that reached the consumer
// before the call commits the stream: a retry does not run the model again
// (the consumer would read the text twice), and the failure is returned.
func TestACutCallAfterDeliveredTextIsCommitted(t *testing.T) {
	cut := cutAnswer(runtime.FinishToolCalls)
	cut.Stream = append([]runtime.Delta{{Text: "looking it up"}}, cut.Stream...)
	m := rt.NewModel(cut, goodAnswer)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools})
	require.Error(t, err)
	assert.Equal(t, string(runtime.KindTransient), runtime.KindOf(err))
	assert.Equal(t, 1, m.Calls())
	assert.Equal(t, "looking it up", resp.Text)
	assert.Empty(t, resp.ToolCalls)
}

// TestACallCutAtTheTokenLimitIsTheRequests: a call cut because the model
// reached max_tokens (finish reason length) is cut again when asked
// again, by this model or another given the same limit: a permanent
// failure that names the limit to raise, not retried and not moved on
// from, which agentc serve answers 400.
func TestACallCutAtTheTokenLimitIsTheRequests(t *testing.T) {
	m := rt.NewModel(cutAnswer(runtime.FinishLength), goodAnswer)
	backup := rt.NewModel(goodAnswer)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Layer("fallback", `{"models":["primary","backup"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m, "backup": backup}})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools, MaxTokens: 8})
	require.Error(t, err)
	assert.Equal(t, string(runtime.KindPermanent), runtime.KindOf(err))
	assert.Contains(t, err.Error(), "max_tokens")
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, http.StatusBadRequest, ce.Status)
	assert.Equal(t, 1, m.Calls(), "not retried: the same limit cuts it again")
	assert.Zero(t, backup.Calls(), "no fallback: the limit is the request's")
	assert.Empty(t, resp.ToolCalls)
	assert.Positive(t, resp.Usage.OutputTokens, "what arrived is charged")
}

// TestACutCallInAnAgentTurn: an agent turn whose model cut a call handed
// the tool chain arguments that are not JSON, which it told the model as
// the call's failure. With a retry in the chat chain the model is asked
// again and the tool runs once on the whole call; without, the turn fails
// with the upstream's failure and no tool runs.
func TestACutCallInAnAgentTurn(t *testing.T) {
	final := rt.Response{Deltas: []string{"done"}}
	for name, tc := range map[string]struct {
		chain []plan.Layer
		runs  int
	}{
		"retry":   {chain: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}, runs: 1},
		"neither": {},
	} {
		t.Run(name, func(t *testing.T) {
			m := rt.NewModel(cutAnswer(runtime.FinishToolCalls), goodAnswer, final)
			tool := rt.NewTool(rt.ToolResult{Value: "sunny"})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: tc.chain}), runtime.Deps{
				Models: map[string]runtime.ModelClient{"primary": m},
				Tools:  map[string]runtime.ToolFunc{"lookup": tool.Func()}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "weather in Paris?",
				Params: runtime.ChatRequest{Tools: lookupTools}})
			assert.Equal(t, tc.runs, tool.Calls())
			if tc.runs == 0 {
				require.Error(t, err)
				assert.Equal(t, string(runtime.KindTransient), runtime.KindOf(err))
				assert.Contains(t, err.Error(), "not complete JSON")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "done", res.Output)
			assert.Equal(t, 3, m.Calls())
			for _, msg := range res.Messages {
				for _, c := range msg.ToolCalls {
					assert.JSONEq(t, `{"q":"Paris"}`, string(c.Arguments), "no cut call in the transcript")
				}
			}
		})
	}
}

// TestAMalformedCallIsNotACut: arguments that are not JSON because the
// model wrote them wrong (single quotes, a brace too many, two objects run
// together) were taken for a cut: the turn failed as the upstream's
// transient failure, and a retry with a breaker opened the breaker of a
// healthy model. Only arguments that end inside a value (or an answer
// without a finish reason) are a cut; a malformed call goes up the chain:
// the tool chain refuses it and the model, told so, repairs its call.
func TestAMalformedCallIsNotACut(t *testing.T) {
	for _, args := range []string{`{'q': 'Paris'}`, `{"q":"Paris"}}`, `{"q":"Paris"}{"q":"Lyon"}`, `{"q" "Paris"}`} {
		t.Run(args, func(t *testing.T) {
			bad := rt.Response{Stream: []runtime.Delta{
				{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "lookup", Arguments: args}}},
				{FinishReason: runtime.FinishToolCalls},
			}}
			m := rt.NewModel(bad, bad, goodAnswer, rt.Response{Deltas: []string{"done"}})
			tool := rt.NewTool(rt.ToolResult{Value: "sunny"})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
				rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms","breaker":{"failures":2,"cooldown":"1h"}}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m},
					Tools: map[string]runtime.ToolFunc{"lookup": tool.Func()}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "weather in Paris?",
				Params: runtime.ChatRequest{Tools: lookupTools}})
			require.NoError(t, err)
			assert.Equal(t, "done", res.Output)
			assert.Equal(t, 4, m.Calls(), "each malformed call is answered by the tool chain, not retried")
			assert.Equal(t, 1, tool.Calls(), "the repaired call runs")
			// The breaker stayed closed: the model still answers.
			_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
			var open *runtime.BreakerOpenError
			assert.False(t, errors.As(err, &open), "the breaker is closed: %v", err)
		})
	}
}

// TestACallWithoutAFinishReasonIsCut: an answer that ended without a
// finish reason (its stream or body ended early) whose call's arguments
// are not JSON was cut, whatever its arguments look like.
func TestACallWithoutAFinishReasonIsCut(t *testing.T) {
	m := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "lookup", Arguments: `{"q":"Par}`}}},
	}})
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools})
	require.Error(t, err)
	assert.Equal(t, string(runtime.KindTransient), runtime.KindOf(err))
	assert.Contains(t, err.Error(), "cut")
}

// TestALengthFromAnEarlierAttemptIsNotThisOnes: the finish reason of a
// failed attempt (length, held with its cut call) stayed on the call, so a
// later attempt cut by the upstream (no finish reason) read as cut at the
// token limit: permanent. Each model call starts without one.
func TestALengthFromAnEarlierAttemptIsNotThisOnes(t *testing.T) {
	lengthThenFail := cutAnswer(runtime.FinishLength)
	lengthThenFail.Stream = append(lengthThenFail.Stream, runtime.Delta{Text: "never sent"})
	lengthThenFail.Err, lengthThenFail.FailAfter = &runtime.CallError{Kind: runtime.KindTransient, Message: "reset"}, 3
	cut := cutAnswer("")
	m := rt.NewModel(lengthThenFail, cut, goodAnswer)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools})
	require.NoError(t, err)
	assert.Equal(t, 3, m.Calls(), "the cut of the second attempt is transient: retried")
	require.Len(t, resp.ToolCalls, 1)
}

// TestTheTokenLimitMessageNamesThePolicysCap: a layer (maxtokens) capped
// the request's max_tokens: the 400 told the client to raise the capped
// value, which the policy caps again. It names what the client asked and
// what the policy capped it to.
func TestTheTokenLimitMessageNamesThePolicysCap(t *testing.T) {
	m := rt.NewModel(cutAnswer(runtime.FinishLength))
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("test.capoutput", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools, MaxTokens: 100})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "100")
	assert.Contains(t, err.Error(), "the policy caps to 8")
}

// capOutput caps a request's max_tokens at 8, as a policy's rewrite does.
type capOutput struct{}

func (capOutput) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		c.Request.MaxTokens = min(c.Request.MaxTokens, 8)
		return next(ctx, c, yield)
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "test.capoutput", Stages: []plan.Stage{plan.StageChat}, New: func() runtime.Middleware { return capOutput{} }})
}

// boundedModel is a model client that sends max_tokens n with a request
// that sets none, as the Anthropic client does.
type boundedModel struct {
	runtime.ModelClient
	n int
}

func (b boundedModel) DefaultMaxTokens() int { return b.n }

// TestTheTokenLimitMessageNamesTheBoundSent: a request without max_tokens
// to a client that sends its own bound (a Claude model's 4096) was told
// "the request asks for 0; 0 is the provider's default": the limit the
// model reached was the bound the client sent, which the message names.
func TestTheTokenLimitMessageNamesTheBoundSent(t *testing.T) {
	for name, tc := range map[string]struct {
		model     runtime.ModelClient
		want, not string
	}{
		"client's bound": {boundedModel{rt.NewModel(cutAnswer(runtime.FinishLength)), 4096}, "the request sets none, and the model's client sent its default, 4096", "asks for 0"},
		"server's bound": {rt.NewModel(cutAnswer(runtime.FinishLength)), "the request sets none: the provider's default bounds the answer", "asks for 0"},
	} {
		pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": tc.model}})
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Tools: lookupTools})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
		assert.NotContains(t, err.Error(), tc.not, name)
	}
}
