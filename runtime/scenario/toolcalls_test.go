package scenario_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// agentPlan declares refund (guarded over 100) and lookup, with typed args.
func agentPlan(chat ...plan.Layer) *plan.Plan {
	p := planWith(plan.Chains{Chat: chat, Tool: []plan.Layer{
		func() plan.Layer {
			l := layer("guard", `{"deny":"args.amount > 100.0 && !has(args.approved_by)","message":"refunds over 100 need an approver"}`)
			l.Name, l.Tools = "refund_limit", []string{"refund"}
			return l
		}(),
	}})
	p.Tools = map[string]plan.Tool{
		"refund": {SideEffecting: true, RetrySafe: true, Description: "Refund an order.",
			Args: json.RawMessage(`{"type":"object","required":["order_id","amount"],"properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"approved_by":{"type":"string"}}}`)},
		"lookup": {Description: "Look an order up.", Args: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)},
	}
	return p
}

func TestScriptedToolCalls(t *testing.T) {
	res, got := run(t, agentPlan(), `{
	  "models": {"primary": [
	    {"text": "let me check", "tool_calls": [{"id": "c1", "name": "lookup", "args": {"order_id": "A1"}},
	                                            {"name": "refund", "args": {"order_id": "A1", "amount": 5}}],
	     "usage": {"input_tokens": 7, "output_tokens": 3}},
	    {"text": "done", "finish_reason": "stop"},
	    {"deltas": ["a"], "tool_calls": [{"name": "lookup", "args": {"order_id": "B2"}}], "fail_after": 2}]},
	  "steps": [
	    {"chat": {"model": "primary", "messages": [{"role": "user", "content": "refund A1"}]}},
	    {"chat": {"model": "primary", "messages": [{"role": "user", "content": "thanks"}], "tools": [], "temperature": 0.2, "seed": 7}},
	    {"chat": {"model": "primary", "messages": [{"role": "user", "content": "B2?"}]}}]}`, scenario.Options{})
	want := `{"steps": [
	  {"outcome": "ok", "text": "let me check", "finish_reason": "tool_calls",
	   "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"order_id": "A1"}},
	                  {"id": "call_primary_1_1", "name": "refund", "arguments": {"order_id": "A1", "amount": 5}}],
	   "requests": [{"model": "primary", "messages": [{"role": "user", "content": "refund A1"}],
	                 "tools": [{"name": "lookup", "description": "Look an order up."}, {"name": "refund", "description": "Refund an order."}]}]},
	  {"outcome": "ok", "text": "done", "finish_reason": "stop",
	   "requests": [{"model": "primary", "temperature": 0.2, "seed": 7}]},
	  {"outcome": "error", "text": "a", "error": {"kind": "transient"}}]}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
	// The second request offered no tools: the key is absent.
	assert.Empty(t, res.Steps[1].Requests[0].Tools)
	assert.Len(t, res.Steps[0].Requests[0].Tools, 2)
	assert.NotContains(t, got.(map[string]any)["steps"].([]any)[1].(map[string]any)["requests"].([]any)[0], "tools")
	// The stream failed inside a call of a request that offers tools: the
	// calls are held until the stream ends, so none of it was delivered.
	assert.NotContains(t, got.(map[string]any)["steps"].([]any)[2], "tool_calls")

	var text strings.Builder
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), `step 0 chat ok model=primary attempts=1 text="let me check" tool_call=lookup{"order_id":"A1"} tool_call=refund{"amount":5,"order_id":"A1"} finish=tool_calls`)
}

// The fragments of a scripted call: the id and name with the first half of
// the arguments, then the rest; the finish reason and usage on the last.
func TestScriptedToolCallFragments(t *testing.T) {
	s, err := scenario.Parse([]byte(`{"models": {"primary": [{"tool_calls": [{"name": "lookup", "args": {"order_id": "é1"}}], "usage": {"input_tokens": 1, "output_tokens": 2}}]},
	  "steps": [{"chat": {"model": "primary"}}]}`))
	require.NoError(t, err)
	var deltas []runtime.Delta
	_, err = scenario.Run(t.Context(), agentPlan(), s, scenario.Options{Wrap: func(d *runtime.Deps) {
		m := d.Models["primary"]
		d.Models["primary"] = runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			return m.Stream(ctx, req, func(d runtime.Delta) bool { deltas = append(deltas, d); return yield(d) })
		})
	}})
	require.NoError(t, err)
	require.Len(t, deltas, 2)
	args := `{"order_id":"é1"}`
	first, second := deltas[0].ToolCalls[0], deltas[1].ToolCalls[0]
	assert.Equal(t, runtime.ToolCallDelta{Index: 0, ID: "call_primary_1_0", Name: "lookup", Arguments: first.Arguments}, first)
	assert.Equal(t, args, first.Arguments+second.Arguments)
	assert.NotEmpty(t, first.Arguments)
	assert.NotEmpty(t, second.Arguments)
	assert.True(t, utf8.ValidString(first.Arguments) && utf8.ValidString(second.Arguments), "split inside a rune")
	assert.Equal(t, runtime.ToolCallDelta{Index: 0, Arguments: second.Arguments}, second)
	assert.Empty(t, deltas[0].FinishReason)
	assert.Equal(t, runtime.FinishToolCalls, deltas[1].FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 1, OutputTokens: 2}, deltas[1].Usage)
}

// A model receives the transcript after the chat chain: pii redacted the
// address, compaction dropped the old turns, fallback sent it to the
// backup.
func TestRequestsAfterLayers(t *testing.T) {
	p := agentPlan(layer("pii", `{"action":"redact","kinds":["email"]}`),
		layer("compaction", `{"max_tokens":64,"keep_recent":2}`),
		layer("fallback", `{"models":["primary","backup"]}`))
	long := strings.Repeat("an old question about the weather. ", 20)
	res, got := run(t, p, `{
	  "models": {"primary": [{"error": "transient"}], "backup": [{"text": "ok"}]},
	  "steps": [{"chat": {"model": "primary", "messages": [
	    {"role": "system", "content": "be brief"},
	    {"role": "user", "content": "`+long+`"},
	    {"role": "assistant", "content": "`+long+`"},
	    {"role": "user", "content": "and today?"},
	    {"role": "assistant", "content": "sunny"},
	    {"role": "user", "content": "mail me at ann@example.com"}]}}]}`, scenario.Options{})
	reqs := res.Steps[0].Requests
	require.Len(t, reqs, 2, "%v", got)
	assert.Equal(t, "primary", reqs[0].Model)
	assert.Equal(t, "backup", reqs[1].Model)
	for _, r := range reqs {
		require.NotEmpty(t, r.Messages)
		roles := []string{}
		for _, m := range r.Messages {
			roles = append(roles, m.Role)
		}
		// The system prompt, the two recent messages and the question the
		// recent answer answers (a transcript opens with a user message);
		// the old exchange went.
		assert.Equal(t, []string{"system", "user", "assistant", "user"}, roles)
		assert.Equal(t, "and today?", r.Messages[1].Content)
		assert.Equal(t, "mail me at [REDACTED:email]", r.Messages[3].Content)
	}
}

// An agent step: the model looks the order up and asks for a refund over
// the limit; the guard refuses it, the model reads the refusal as the
// tool's result and answers.
func TestAgentStep(t *testing.T) {
	res, got := run(t, agentPlan(layer("meter", `{}`)), `{
	  "models": {"primary": [
	    {"tool_calls": [{"id": "l1", "name": "lookup", "args": {"order_id": "B2"}}], "usage": {"input_tokens": 10, "output_tokens": 2}},
	    {"tool_calls": [{"id": "r1", "name": "refund", "args": {"order_id": "B2", "amount": 250}}], "usage": {"input_tokens": 20, "output_tokens": 2}},
	    {"text": "I cannot refund that without an approver.", "finish_reason": "stop", "usage": {"input_tokens": 30, "output_tokens": 8}}]},
	  "tools": {"lookup": [{"result": {"amount": 250}}], "refund": [{"result": {"ok": true}}]},
	  "steps": [{"agent": {"model": "primary", "messages": [{"role": "system", "content": "support"}], "input": "refund B2",
	                       "params": {"temperature": 0}}}]}`, scenario.Options{})
	want := `{"steps": [{"stage": "agent", "outcome": "ok", "output": "I cannot refund that without an approver.",
	    "agent": {"steps": 3, "tool_calls": 2, "blocked": 1, "stop": "done", "finish_reason": "stop",
	              "usage": {"input_tokens": 60, "output_tokens": 12}}}],
	  "executions": {"models": {"primary": 3}, "tools": {"lookup": 1, "refund": 0}},
	  "meter": {"input_tokens": 60, "output_tokens": 12, "calls": 3}}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
	reqs := res.Steps[0].Requests
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		require.NotNil(t, r.Temperature)
		assert.Zero(t, *r.Temperature)
	}
	assert.Len(t, reqs[0].Messages, 2)
	// The third request carries the refusal as the refund's result.
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	assert.Equal(t, "tool", last.Role)
	assert.Equal(t, "r1", last.ToolCallID)
	require.Len(t, last.Parts, 1)
	assert.True(t, last.Parts[0].IsError)
	assert.Contains(t, last.Parts[0].Text, "refused: the call was blocked by policy (refund_limit): refunds over 100 need an approver")
	assert.Equal(t, `{"amount":250}`, reqs[1].Messages[len(reqs[1].Messages)-1].Parts[0].Text)
	msgs := res.Steps[0].Agent.Messages
	assert.Len(t, msgs, 7) // system, user, assistant, tool, assistant, tool, assistant

	var text strings.Builder
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), `step 0 agent ok attempts=1 model_calls=3 tool_calls=2 blocked=1 stop=done output="I cannot refund that without an approver."`)
}

func TestAgentStepEndTurn(t *testing.T) {
	_, got := run(t, agentPlan(), `{
	  "models": {"primary": [{"tool_calls": [{"name": "refund", "args": {"order_id": "B2", "amount": 250}}]}]},
	  "tools": {"refund": [{"result": {"ok": true}}]},
	  "steps": [{"turn": {"input": "refund B2", "steps": [{"agent": {"model": "primary", "input": "refund B2", "on_block": "end_turn"}}]}}]}`, scenario.Options{})
	want := `{"steps": [{"stage": "turn", "outcome": "blocked", "error": {"layer": "refund_limit"},
	    "steps": [{"stage": "agent", "outcome": "blocked", "agent": {"steps": 1, "blocked": 1}}]}],
	  "executions": {"tools": {"refund": 0}}}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
}

// max_steps and max_parallel reach the agent loop: a bound of 1 stops
// after the first model call with its tool call run.
func TestAgentStepBounds(t *testing.T) {
	_, got := run(t, agentPlan(), `{
	  "models": {"primary": [{"tool_calls": [{"name": "lookup", "args": {"order_id": "B2"}}]}]},
	  "tools": {"lookup": [{"result": {"amount": 5}}]},
	  "steps": [{"agent": {"model": "primary", "input": "look B2 up", "max_steps": 1, "max_parallel": 1}}]}`, scenario.Options{})
	want := `{"steps": [{"stage": "agent", "outcome": "ok", "agent": {"steps": 1, "tool_calls": 1, "stop": "max_steps"}}],
	  "executions": {"models": {"primary": 1}, "tools": {"lookup": 1}}}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
}

// A chat step's provider-specific parameters reach the request.
func TestChatStepProviderParameters(t *testing.T) {
	res, _ := run(t, agentPlan(), `{
	  "models": {"primary": [{"text": "ok"}]},
	  "steps": [{"chat": {"model": "primary", "messages": [{"role": "user", "content": "hi"}],
	    "parallel_tool_calls": false, "cache_control": {"type": "ephemeral"}, "betas": ["b1"],
	    "thinking": {"type": "enabled", "budget_tokens": 1024}, "reasoning_effort": "low"}}]}`, scenario.Options{})
	require.Len(t, res.Steps[0].Requests, 1)
	req := res.Steps[0].Requests[0]
	require.NotNil(t, req.ParallelToolCalls)
	assert.False(t, *req.ParallelToolCalls)
	require.NotNil(t, req.CacheControl)
	assert.Equal(t, []string{"b1"}, req.Betas)
	require.NotNil(t, req.Thinking)
	assert.Equal(t, "enabled", req.Thinking.Type)
	assert.Equal(t, "low", req.ReasoningEffort)
}

// An assistant message's call of a custom tool (`custom`: its arguments
// are {"input": TEXT}) reaches the model marked, and is recorded so.
func TestChatStepCustomToolCall(t *testing.T) {
	res, got := run(t, agentPlan(), `{
	  "models": {"primary": [{"text": "done"}]},
	  "steps": [{"chat": {"model": "primary", "tools": [{"name": "apply_patch", "custom": {"format": "text"}}], "messages": [
	    {"role": "user", "content": "fix it"},
	    {"role": "assistant", "tool_calls": [{"id": "c1", "name": "apply_patch", "arguments": {"input": "*** Begin Patch"}, "custom": true}]},
	    {"role": "tool", "tool_call_id": "c1", "content": "Done."}]}}]}`, scenario.Options{})
	require.Len(t, res.Steps, 1)
	require.Len(t, res.Steps[0].Requests, 1)
	call := res.Steps[0].Requests[0].Messages[1].ToolCalls[0]
	assert.True(t, call.Custom, "the call is recorded as the custom call the model was sent")
	in, err := call.CustomInput()
	require.NoError(t, err)
	assert.Equal(t, "*** Begin Patch", in)
	var w any
	require.NoError(t, json.Unmarshal([]byte(`{"steps": [{"outcome": "ok", "requests": [{"messages": [{}, {"tool_calls": [{"id": "c1", "custom": true}]}, {}]}]}]}`), &w))
	require.NoError(t, subset("$", w, got))
}

// max_tool_calls reaches the agent loop: an answer of two calls over a
// bound of 1 runs neither, and the model is asked again.
func TestAgentStepMaxToolCalls(t *testing.T) {
	_, got := run(t, agentPlan(), `{
	  "models": {"primary": [{"tool_calls": [{"name": "lookup", "args": {"order_id": "B2"}}, {"name": "lookup", "args": {"order_id": "B3"}}]}, {"text": "one at a time"}]},
	  "tools": {"lookup": [{"result": {"amount": 5}}]},
	  "steps": [{"agent": {"model": "primary", "input": "look B2 and B3 up", "max_tool_calls": 1}}]}`, scenario.Options{})
	want := `{"steps": [{"stage": "agent", "outcome": "ok", "output": "one at a time", "agent": {"steps": 2, "tool_calls": 2, "stop": "done"}}],
	  "executions": {"models": {"primary": 2}, "tools": {"lookup": 0}}}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
}
