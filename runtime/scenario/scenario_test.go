package scenario_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

func layer(use string, config string) plan.Layer {
	return plan.Layer{Use: use, Name: use, Config: json.RawMessage(config)}
}

func designPlan() *plan.Plan {
	return &plan.Plan{
		Version: plan.Version,
		Policy:  "support",
		Models: map[string]plan.Model{
			"primary": {USDPerMTokIn: 3, USDPerMTokOut: 15},
			"backup":  {USDPerMTokIn: 0.5, USDPerMTokOut: 1.5},
		},
		Tools: map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}},
		Chains: plan.Chains{
			Chat: []plan.Layer{
				layer("tracing", `{}`),
				layer("meter", `{"budget":{"usd":2.0},"scope":"run"}`),
				layer("fallback", `{"models":["primary","backup"]}`),
				layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"50ms","multiplier":2}`),
			},
			Tool: []plan.Layer{
				layer("tracing", `{}`),
				layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"50ms","multiplier":2}`),
			},
		},
		Admit: &plan.Predicate{Stage: plan.StageAdmit, Source: "item.metadata.tier != 'inferred'"},
	}
}

const designScenario = `{
  "run_id": "run-1",
  "models": {"primary": [{"error": "rate_limited", "retry_after_ms": 5},
                         {"text": "hello", "usage": {"input_tokens": 10, "output_tokens": 5}}],
             "backup":  [{"deltas": ["he", "llo"], "fail_after": 1}]},
  "tools":  {"refund": [{"error": "transient"}, {"result": {"ok": true}}]},
  "steps": [
    {"chat": {"model": "primary", "messages": [{"role": "user", "content": "hi"}], "consume": 1}},
    {"tool": {"name": "refund", "args": {"order_id": "A1", "amount": 50}}},
    {"admit": {"items": [{"content": "x", "source": "kb", "score": 0.9, "metadata": {"tier": "inferred"}}]}}
  ]
}`

func TestDesignExample(t *testing.T) {
	s, err := scenario.Parse([]byte(designScenario))
	require.NoError(t, err)
	res, err := scenario.Run(context.Background(), designPlan(), s, scenario.Options{})
	require.NoError(t, err)
	got, err := json.Marshal(res)
	require.NoError(t, err)
	req := `{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "refund", "parameters": {"type": "object"}}]}`
	assert.JSONEq(t, `{"steps": [{"index": 0, "stage": "chat", "outcome": "ok", "text": "hello", "model": "primary", "attempts": 2,
             "requests": [`+req+`, `+req+`]},
           {"index": 1, "stage": "tool", "outcome": "ok", "result": {"ok": true}, "attempts": 2, "deduped": false},
           {"index": 2, "stage": "admit", "admitted": []}],
 "executions": {"models": {"primary": 2, "backup": 0}, "tools": {"refund": 2}},
 "calls": {"models": {"primary": 2, "backup": 0}, "tools": {"refund": 2}},
 "audit": [],
 "meter": {"input_tokens": 10, "output_tokens": 5, "usd": 0.000105, "calls": 1},
 "unused": [{"script": "models.backup", "taken": 0, "items": 1}]}`, string(got))
}

// An evaluated scenario (CUE, a test case) names its errors' places by
// path: a line and column would count in the generated JSON.
// Several problems are listed in the scenario's order: steps[2] before
// steps[10], not as their texts sort.
func TestParseErrorsInOrder(t *testing.T) {
	ok := `{"tool": {"name": "t"}}, `
	_, err := scenario.Parse([]byte(`{"steps": [{"tool": {}}, ` + ok + `{"tool": {}}, ` + strings.Repeat(ok, 7) + `{"chat": {"consume": -1}}]}`))
	require.Error(t, err)
	assert.Equal(t, "scenario: line 1, col 13: steps[0].tool: name is required\nline 1, col 52: steps[2].tool: name is required\nline 1, col 241: steps[10].chat: consume must not be negative", err.Error())
}

func TestParseEvaluatedErrors(t *testing.T) {
	_, err := scenario.ParseEvaluated([]byte(`{"steps": [{"chat": {}}, {"tool": {"nme": "x"}}]}`))
	require.Error(t, err)
	assert.Equal(t, `scenario: steps[1].tool: unknown field "nme"; did you mean "name"?`, err.Error())
	_, err = scenario.ParseEvaluated([]byte(`{"steps": [{"chat": {"model": 1}}]}`))
	require.Error(t, err)
	assert.Equal(t, `scenario: steps[0].chat.model: a number (1), where a string is expected`, err.Error())
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"syntax", "{\n  \"steps\": [\n    {\"chat\": }\n  ]\n}", []string{"line 3, col"}},
		{"unknown field", `{"steps": [{"chat": {"modle": "x"}}]}`, []string{`line 1, col 22: steps[0].chat: unknown field "modle"; did you mean "model"?`}},
		{"unknown field on a later line", "{\"steps\": [\n  {\"chat\": {}},\n  {\"tool\": {\"nme\": \"x\"}}]}", []string{`line 3, col 13: steps[1].tool: unknown field "nme"; did you mean "name"?`}},
		{"unknown field in a script", `{"models": {"m": [{"text": "a", "usage": {"input_token": 3}}]}, "steps": [{"chat": {}}]}`, []string{`models.m[0].usage: unknown field "input_token"; did you mean "input_tokens"?`}},
		{"unknown field in a message", `{"steps": [{"chat": {"messages": [{"role": "user", "parts": [{"type": "text", "txt": "x"}]}]}}]}`, []string{`steps[0].chat.messages[0].parts[0]: unknown field "txt"; did you mean "text"?`}},
		{"unknown field past open values", `{"tools": {"t": [{"result": {"any": {"thing": [1, {"x": 2}]}}}]}, "steps": [{"tool": {"name": "t", "args": {"a": {"b": 1}}}}], "stpes": []}`, []string{`line 1, col 128: unknown field "stpes"; did you mean "steps"?`}},
		{"type", `{"steps": [{"chat": {"model": 1}}]}`, []string{`line 1, col 31: steps[0].chat.model: a number (1), where a string is expected`}},
		// A value of the wrong type is placed by its full path, in the
		// scenario's terms rather than Go's.
		{"type in a later step", `{"steps": [{"chat": {}}, {"tool": {"name": "t", "args": [1]}}]}`, []string{`line 1, col 57: steps[1].tool.args: a list, where an object is expected`}},
		{"type in a script", `{"models": {"m": [{"text": "a"}, {"text": "b", "fail_after": 0.5}]}, "steps": [{"chat": {}}]}`, []string{`models.m[1].fail_after: a number (0.5), where an integer is expected`}},
		{"script not a list", `{"models": {"m": {"text": "a"}}, "steps": [{"chat": {}}]}`, []string{`models.m: an object, where a list is expected`}},
		{"type of a flag", `{"hold_background": "yes", "steps": [{"chat": {}}]}`, []string{`hold_background: a string ("yes"), where true or false is expected`}},
		{"not an object", `[{"chat": {}}]`, []string{`line 1, col 1: the scenario is a list, where an object is expected`}},
		{"no steps", `{"steps": []}`, []string{"steps: at least one step is required"}},
		{"empty parallel", `{"steps": [{"parallel": []}]}`, []string{"steps[0].parallel: at least one step is required"}},
		{"two kinds", `{"steps": [{"chat": {}, "tool": {"name": "x"}}]}`, []string{"steps[0]: a step has exactly one of chat, tool, admit, turn, agent, parallel, state, checkpoint, crash, resume (found 2)"}},
		{"tool name", `{"steps": [{"chat": {}}, {"tool": {}}]}`, []string{"steps[1].tool: name is required"}},
		{"nested", `{"steps": [{"turn": {"input": "x", "steps": [{"tool": {}}]}}]}`, []string{"steps[0].turn.steps[0].tool: name is required"}},
		{"bad error kind", `{"models": {"m": [{"error": "boom"}]}, "steps": [{"chat": {}}]}`, []string{`models.m[0]: error "boom" is not one of`}},
		{"empty item", `{"models": {"m": [{}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: one of text, deltas, refusal, tool_calls or error is required"}},
		{"tool call without name", `{"models": {"m": [{"tool_calls": [{"args": {}}]}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: tool_calls[0]: name is required"}},
		{"bad finish reason", `{"models": {"m": [{"text": "a", "finish_reason": "done"}]}, "steps": [{"chat": {}}]}`, []string{`models.m[0]: finish_reason "done" is not one of stop, length, tool_calls, content_filter, pause_turn`}},
		{"misspelt error kind", `{"models": {"m": [{"error": "transiant"}]}, "steps": [{"chat": {}}]}`, []string{`models.m[0]: error "transiant" is not one of transient, rate_limited, timeout, permanent, refused; did you mean "transient"?`}},
		{"misspelt finish reason", `{"models": {"m": [{"text": "a", "finish_reason": "stp"}]}, "steps": [{"chat": {}}]}`, []string{`finish_reason "stp" is not one of stop, length, tool_calls, content_filter, pause_turn; did you mean "stop"?`}},
		{"finish reason on an error", `{"models": {"m": [{"error": "transient", "finish_reason": "stop"}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: finish_reason needs a response"}},
		{"usage on an error", `{"models": {"m": [{"error": "timeout", "usage": {"input_tokens": 5}}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: usage needs a response"}},
		{"usage with fail_after", `{"models": {"m": [{"deltas": ["a", "b"], "fail_after": 1, "usage": {"input_tokens": 5}}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: fail_after fails the stream instead of ending it"}},
		{"finish reason with fail_after", `{"models": {"m": [{"text": "a", "fail_after": 1, "finish_reason": "stop"}]}, "steps": [{"chat": {}}]}`, []string{"models.m[0]: fail_after fails the stream instead of ending it"}},
		{"fail_after past tool calls", `{"models": {"m": [{"text": "a", "tool_calls": [{"name": "t"}], "fail_after": 4}]}, "steps": [{"chat": {}}]}`, []string{"fail_after 4 is past the 3 deltas"}},
		{"agent without model", `{"steps": [{"agent": {"input": "hi"}}]}`, []string{"steps[0].agent: model is required"}},
		{"agent without input", `{"steps": [{"agent": {"model": "m"}}]}`, []string{"steps[0].agent: input or messages is required"}},
		{"agent with an empty input", `{"steps": [{"agent": {"model": "m", "input": ""}}]}`, []string{"line 1, col 37: steps[0].agent.input: the input is empty, and the step has no messages: write the user's message"}},
		// The runtime reads 0 as its default: a bound of 0 would silently
		// be one of 8 (or 4).
		{"agent max_steps 0", `{"steps": [{"agent": {"model": "m", "input": "x", "max_steps": 0}}]}`, []string{"line 1, col 51: steps[0].agent.max_steps: 0 is not a bound (at least 1; leave it out for the default of 8)"}},
		{"agent max_steps negative", `{"steps": [{"agent": {"model": "m", "input": "x", "max_steps": -2}}]}`, []string{"steps[0].agent.max_steps: -2 is not a bound (at least 1; leave it out for the default of 8)"}},
		{"agent max_parallel 0", `{"steps": [{"agent": {"model": "m", "input": "x", "max_parallel": 0}}]}`, []string{"steps[0].agent.max_parallel: 0 is not a bound (at least 1; leave it out for the default of 4)"}},
		{"agent max_tool_calls 0", `{"steps": [{"agent": {"model": "m", "input": "x", "max_tool_calls": 0}}]}`, []string{"steps[0].agent.max_tool_calls: 0 is not a bound (at least 1; leave it out for the default of 64)"}},
		{"agent on_block", `{"steps": [{"agent": {"model": "m", "input": "x", "on_block": "ignore"}}]}`, []string{`steps[0].agent: on_block "ignore" is not "tell_model" or "end_turn"`}},
		{"agent params model", `{"steps": [{"agent": {"model": "m", "input": "x", "params": {"model": "n"}}}]}`, []string{"steps[0].agent.params: model and messages are the agent step's own"}},
		{"agent in a turn", `{"steps": [{"turn": {"input": "x", "steps": [{"agent": {"input": "x"}}]}}]}`, []string{"steps[0].turn.steps[0].agent: model is required"}},
		{"fail_after past", `{"models": {"m": [{"deltas": ["a"], "fail_after": 2}]}, "steps": [{"chat": {}}]}`, []string{"fail_after 2 is past the 1 deltas"}},
		{"retry_after without rate_limited", `{"tools": {"t": [{"error": "transient", "retry_after_ms": 3}]}, "steps": [{"chat": {}}]}`, []string{`tools.t[0]: retry_after_ms needs error "rate_limited"`}},
		{"refused tool", `{"tools": {"t": [{"error": "refused"}]}, "steps": [{"chat": {}}]}`, []string{`tools.t[0]: error "refused" is a model provider's`}},
		{"negative consume", `{"steps": [{"chat": {"consume": -1}}]}`, []string{"steps[0].chat: consume must not be negative"}},
		{"trailing", `{"steps": [{"chat": {}}]} {}`, []string{"trailing data"}},
		{"misspelt role", `{"steps": [{"chat": {"messages": [{"role": "usr", "content": "hi"}]}}]}`, []string{`steps[0].chat.messages[0]: role "usr" is not one of system, user, assistant, tool; did you mean "user"?`}},
		{"missing role", `{"steps": [{"agent": {"model": "m", "messages": [{"content": "hi"}]}}]}`, []string{`steps[0].agent.messages[0]: role "" is not one of`}},
		{"misspelt part type", `{"steps": [{"chat": {"messages": [{"role": "user", "parts": [{"type": "txt", "text": "x"}]}]}}]}`, []string{`steps[0].chat.messages[0].parts[0]: type "txt" is not one of text, image, tool_result, thinking, redacted_thinking, document; did you mean "text"?`}},
		{"misspelt format", `{"steps": [{"agent": {"model": "m", "input": "x", "params": {"response_format": {"type": "json"}}}}]}`, []string{`steps[0].agent.params.response_format: type "json" is not one of text, json_object, json_schema; did you mean "json_object"?`}},
		{"dns address", `{"dns": {"api.example.com": ["93.184.216.300"]}, "steps": [{"chat": {}}]}`, []string{`line 1, col 30: dns."api.example.com"[0]: "93.184.216.300" is not an IP address`}},
		{"dns without address", `{"dns": {"api.example.com": []}, "steps": [{"chat": {}}]}`, []string{`line 1, col 10: dns."api.example.com": at least one address is required`}},
		{"dns url", `{"dns": {"https://api.example.com": ["93.184.216.34"]}, "steps": [{"chat": {}}]}`, []string{`dns: "https://api.example.com" is not a host name`}},
		{"repeated key", "{\"models\": {\"m\": [{\"text\": \"a\"}]},\n \"models\": {\"m\": []}, \"steps\": [{\"chat\": {}}]}", []string{`line 2, col 2: key "models" repeats a key of the same object (only the last would count)`}},
	}
	// A document, a text document and an image a tool returned are parts
	// a chat step holds as the gateway decodes them.
	s, err := scenario.Parse([]byte(`{"steps": [{"chat": {"messages": [{"role": "user", "parts": [
		{"type": "tool_result", "tool_call_id": "t1"}, {"type": "image", "tool_call_id": "t1", "image_url": "https://example.com/a.png"},
		{"type": "text", "text": "notes", "document": true},
		{"type": "document", "media_type": "application/pdf", "image_url": "data:application/pdf;base64,JVBERi0=", "filename": "q3.pdf"}]}]}}]}`))
	require.NoError(t, err)
	assert.Equal(t, []runtime.ContentPart{
		{Type: runtime.PartToolResult, ToolCallID: "t1"}, {Type: runtime.PartImage, ToolCallID: "t1", ImageURL: "https://example.com/a.png"},
		{Type: runtime.PartText, Text: "notes", Document: true},
		{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0=", Filename: "q3.pdf"},
	}, s.Steps[0].Chat.Messages[0].Parts)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.in))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A script no call can take (a model or tool the policy does not declare
// and no step names) is refused with a did-you-mean: a misspelt tool name
// would leave the declared tool unscripted and the test exercising nothing.
// An undeclared name the scenario calls stands for a host that registers it.
func TestRunRefusesUncalledScripts(t *testing.T) {
	tests := []struct {
		name, scen string
		want       []string
	}{
		{"misspelt tool", `{"tools": {"refnd": [{"result": 1}]}, "steps": [{"tool": {"name": "refund", "args": {}}}]}`,
			[]string{`tools.refnd: the policy declares no tool "refnd" and no step calls it`, `did you mean "refund"?`}},
		{"misspelt model", `{"models": {"primry": [{"text": "hi"}]}, "steps": [{"chat": {"model": "primary", "messages": []}}]}`,
			[]string{`models.primry: the policy declares no model "primry"`, `did you mean "primary"? (it declares backup, primary)`}},
		{"several", `{"models": {"bakup": [{"text": "hi"}]}, "tools": {"rfund": [{"result": 1}]}, "steps": [{"chat": {"model": "primary", "messages": []}}]}`,
			[]string{`models.bakup:`, `tools.rfund:`}},
		// A declared tool's script that no step calls and no model item
		// asks for: no layer calls a tool.
		{"declared tool nothing calls", `{"tools": {"refund": [{"result": 1}]}, "steps": [{"chat": {"model": "primary", "messages": []}}]}`,
			[]string{`line 1, col 12: tools.refund: no step calls tool "refund" and no scripted model item asks for it, so the script is never used`}},
		// Only a grounding section retrieves.
		{"retrieval without grounding", "{\"steps\": [{\"chat\": {\"model\": \"primary\", \"messages\": []}}],\n \"retrieval\": [{\"items\": []}]}",
			[]string{`line 2, col 2: retrieval: the policy has no grounding section, so nothing retrieves and the script is never used`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(tt.scen))
			require.NoError(t, err)
			_, err = scenario.Run(context.Background(), designPlan(), s, scenario.Options{})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	for _, ok := range []string{
		// A host's tool the policy does not declare: the step is refused.
		`{"tools": {"wipe": [{"result": 1}]}, "steps": [{"tool": {"name": "wipe", "args": {}}}]}`,
		// Requested by a scripted model.
		`{"models": {"primary": [{"tool_calls": [{"name": "wipe"}]}, {"text": "done"}]}, "tools": {"wipe": [{"result": 1}]},
		  "steps": [{"agent": {"model": "primary", "input": "x"}}]}`,
		// Settled by an agent step: its transcript left the call without
		// a result.
		`{"models": {"primary": [{"text": "done"}]}, "tools": {"refund": [{"result": 1}]},
		  "steps": [{"agent": {"model": "primary", "messages": [{"role": "assistant", "tool_calls": [{"id": "c1", "name": "refund", "arguments": {}}]}]}}]}`,
		// A model the policy does not declare, called by name, inside a turn.
		`{"models": {"local": [{"text": "hi"}]}, "steps": [{"turn": {"input": "x", "steps": [{"chat": {"model": "local", "messages": []}}]}}]}`,
	} {
		s, err := scenario.Parse([]byte(ok))
		require.NoError(t, err)
		_, err = scenario.Run(context.Background(), designPlan(), s, scenario.Options{})
		require.NoError(t, err, ok)
	}
}

// An assistant message may carry the thinking blocks a Claude model wrote,
// as a gateway client sends them back.
func TestParseThinkingParts(t *testing.T) {
	sc, err := scenario.Parse([]byte(`{"steps": [{"chat": {"thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [
		{"role": "user", "content": "hi"},
		{"role": "assistant", "parts": [{"type": "thinking", "text": "hm", "signature": "sig"}, {"type": "redacted_thinking", "signature": "enc"}, {"type": "text", "text": "hello"}]},
		{"role": "user", "content": "again"}]}}]}`))
	require.NoError(t, err)
	parts := sc.Steps[0].Chat.Messages[1].Parts
	require.Len(t, parts, 3)
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartThinking, Text: "hm", Signature: "sig"}, parts[0])
	assert.Equal(t, "enc", parts[1].Signature)
	require.NotNil(t, sc.Steps[0].Chat.Thinking)
	assert.Equal(t, 1024, int(sc.Steps[0].Chat.Thinking.BudgetTokens))
}

// FillFalse fills in the bools the result omits when false, and nothing
// that is absent for another reason.
func TestFillFalse(t *testing.T) {
	var want, got any
	require.NoError(t, json.Unmarshal([]byte(`{"crashed": false, "steps": [{"refusal": false, "deduped": false, "result": false}], "nope": false}`), &want))
	require.NoError(t, json.Unmarshal([]byte(`{"steps": [{"outcome": "ok"}]}`), &got))
	scenario.FillFalse(want, got)
	assert.Equal(t, map[string]any{"crashed": false, "steps": []any{map[string]any{"outcome": "ok", "refusal": false}}}, got)
}

// A step calling a model the policy does not declare and the scenario
// does not script could only fail: it is refused before the run, at its
// place, with a did-you-mean; so is a tool, where the policy lets
// undeclared tools run. Every problem is placed in the JSON text.
func TestRunRefusesUnknownCalls(t *testing.T) {
	refused := func(t *testing.T, p *plan.Plan, src string) *scenario.Error {
		t.Helper()
		s, err := scenario.Parse([]byte(src))
		require.NoError(t, err)
		_, err = scenario.Run(context.Background(), p, s, scenario.Options{})
		var se *scenario.Error
		require.ErrorAs(t, err, &se)
		return se
	}
	bare := planWith(plan.Chains{})
	se := refused(t, bare, "{\"tools\": {\"refnd\": [{\"result\": 1}]},\n \"steps\": [{\"tool\": {\"name\": \"refund\", \"args\": {}}},\n  {\"parallel\": [{\"chat\": {\"model\": \"primry\", \"messages\": []}}]}]}")
	assert.Equal(t, `s.json:1:12: tools.refnd: the policy declares no tool "refnd" and no step calls it, so the script is never used; did you mean "refund"? (it declares refund)
s.json:3:27: steps[1].parallel[0].chat.model: the policy declares no model "primry" and the scenario scripts none, so the call can only fail; did you mean "primary"? (it declares backup, primary)`, se.In("s.json"))
	se = refused(t, bare, `{"steps": [{"agent": {"model": "bakup", "input": "x"}}]}`)
	assert.Contains(t, se.Error(), `scenario: line 1, col 23: steps[0].agent.model: the policy declares no model "bakup"`)

	open := planWith(plan.Chains{})
	open.Settings.AllowUndeclaredTools = true
	se = refused(t, open, `{"steps": [{"tool": {"name": "refnd", "args": {}}}]}`)
	assert.Contains(t, se.Error(), `steps[0].tool.name: the policy declares no tool "refnd" and the scenario scripts none, so the call can only fail; did you mean "refund"?`)

	// A fallback or hedge whose when is false for the model the step
	// names is skipped, and the call fails as not registered.
	scoped := func(use, when string) *plan.Plan {
		l := layer(use, `{"models":["primary","backup"]}`)
		l.When = &plan.Predicate{Stage: plan.StageChat, Source: when}
		return planWith(plan.Chains{Chat: []plan.Layer{l}})
	}
	se = refused(t, scoped("fallback", "request.model == 'backup'"), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"chat": {"model": "primry", "messages": []}}]}`)
	assert.Contains(t, se.Error(), `steps[0].chat.model: the policy declares no model "primry" and the scenario scripts none, so the call can only fail; did you mean "primary"?`)
	se = refused(t, scoped("hedge", "request.model.startsWith('back') && size(messages) > 0"), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"chat": {"model": "primry", "messages": []}}]}`)
	assert.Contains(t, se.Error(), `steps[0].chat.model: the policy declares no model "primry"`)

	for _, tt := range []struct {
		p   *plan.Plan
		src string
	}{
		// A when that may hold for the call lets the layer serve it.
		{scoped("fallback", "request.model != 'backup'"), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"chat": {"model": "any", "messages": []}}]}`},
		{scoped("hedge", "size(messages) < 3"), `{"models": {"primary": [{"text": "hi"}], "backup": [{"text": "hi"}]}, "steps": [{"chat": {"model": "any", "messages": []}}]}`},
		// Without allow_undeclared_tools the policy refuses the call, as a
		// case may assert.
		{designPlan(), `{"steps": [{"tool": {"name": "refnd", "args": {}}}]}`},
		// A fallback serves the call with the models it lists.
		{planWith(plan.Chains{Chat: []plan.Layer{layer("fallback", `{"models":["primary"]}`)}}), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"chat": {"model": "any", "messages": []}}]}`},
	} {
		s, err := scenario.Parse([]byte(tt.src))
		require.NoError(t, err)
		_, err = scenario.Run(context.Background(), tt.p, s, scenario.Options{})
		require.NoError(t, err, tt.src)
	}
}

// A state step naming a field the policy does not declare could only fail:
// it is refused before the run, at its place, with a did-you-mean, a read
// as a write (a misspelt get would otherwise pass as a field not yet set).
func TestRunRefusesUndeclaredStateFields(t *testing.T) {
	p := &plan.Plan{Version: plan.Version, Policy: "p", State: &plan.State{Fields: map[string]plan.StateField{
		"limit": {}, "notes": {},
	}}}
	s, err := scenario.Parse([]byte("{\"steps\": [{\"state\": {\"set\": \"limit\", \"value\": 2}},\n" +
		"  {\"state\": {\"get\": \"limt\"}},\n" +
		"  {\"turn\": {\"steps\": [{\"state\": {\"append\": \"note\", \"value\": 1}}]}}]}"))
	require.NoError(t, err)
	_, err = scenario.Run(context.Background(), p, s, scenario.Options{})
	var se *scenario.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, `s.json:2:14: steps[1].state.get: the policy declares no state field "limt", so the step can only fail; did you mean "limit"? (it declares limit, notes)
s.json:3:34: steps[2].turn.steps[0].state.append: the policy declares no state field "note", so the step can only fail; did you mean "notes"? (it declares limit, notes)`, se.In("s.json"))

	// Under a policy without state, the step names what is missing.
	s, err = scenario.Parse([]byte(`{"steps": [{"state": {"get": "limit"}}]}`))
	require.NoError(t, err)
	_, err = scenario.Run(context.Background(), &plan.Plan{Version: plan.Version, Policy: "p"}, s, scenario.Options{})
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []string{`steps[0].state.get: the policy declares no state field "limit", so the step can only fail (the policy declares no state fields)`}, se.Messages())
}

// Script items no call took are listed in the result, and placed in the
// scenario's text at the first of them: a warning, since a case may script
// a tool to show that the policy refuses it (want executions 0).
func TestRunListsUnusedItems(t *testing.T) {
	const src = "{\"models\": {\"primary\": [{\"text\": \"a\"},\n  {\"text\": \"b\"}]},\n" +
		" \"tools\": {\"refund\": [{\"result\": 1}]},\n" +
		" \"steps\": [{\"chat\": {\"model\": \"primary\", \"messages\": []}}, {\"tool\": {\"name\": \"refund\", \"args\": {}}}]}"
	s, err := scenario.Parse([]byte(src))
	require.NoError(t, err)
	res, err := scenario.Run(context.Background(), designPlan(), s, scenario.Options{})
	require.NoError(t, err)
	assert.Equal(t, []scenario.Unused{{Script: "models.primary", Taken: 1, Items: 2}}, res.Unused)
	var text strings.Builder
	require.NoError(t, res.WriteText(&text))
	assert.Contains(t, text.String(), "\nunused: models.primary took 1 of 2 items\n")
	w := scenario.UnusedWarnings(s, res)
	require.NotNil(t, w)
	assert.Equal(t, `s.json:2:3: models.primary[1]: no call took this item: the run took 1 of the script's 2 items`, w.In("s.json"))

	// Every item taken: nothing is listed.
	s, err = scenario.Parse([]byte(`{"models": {"primary": [{"text": "a"}]}, "steps": [{"chat": {"model": "primary", "messages": []}}]}`))
	require.NoError(t, err)
	res, err = scenario.Run(context.Background(), designPlan(), s, scenario.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Unused)
	assert.Nil(t, scenario.UnusedWarnings(s, res))
}

// A want expecting an error from a layer the policy does not have could
// never pass: it is refused with the layers and a did-you-mean. The names
// that are no layer of a chain (tools, checkpoint, grounding, a state
// field's) are known.
func TestCheckWantNames(t *testing.T) {
	p := designPlan()
	p.Chains.Tool = append(p.Chains.Tool, func() plan.Layer {
		l := layer("guard", `{}`)
		l.Name = "refund_limit"
		return l
	}())
	p.State = &plan.State{Fields: map[string]plan.StateField{"limit": {}}}
	want := func(s string) any {
		var w any
		require.NoError(t, json.Unmarshal([]byte(s), &w))
		return w
	}
	err := scenario.CheckWantNames(want(`{"steps": [{"outcome": "ok"}, {"steps": [{"error": {"layer": "refund_limt"}}]}]}`), p, nil)
	require.Error(t, err)
	assert.Equal(t, `steps[1].steps[0].error.layer: the policy has no layer "refund_limt", so no error comes from it; did you mean "refund_limit"? (its layers: tracing, meter, fallback, retry, refund_limit)`, err.Error())
	for _, ok := range []string{
		`{"steps": [{"error": {"layer": "refund_limit"}}, {"error": {"layer": "tools"}}, {"error": {"layer": ""}}]}`,
		`{"steps": [{"error": {"layer": "checkpoint"}}, {"error": {"layer": "grounding"}}]}`,
		`{"steps": [{"error": {"layer": "state.limit"}}, {"error": {"layer": "state.limit.on_set[0]"}}]}`,
		`{"steps": [{"error": null}]}`,
	} {
		assert.NoError(t, scenario.CheckWantNames(want(ok), p, nil), ok)
	}
	assert.Error(t, scenario.CheckWantNames(want(`{"steps": [{"error": {"layer": "state.limt"}}]}`), p, nil))
}

// A want asserting that no audit record was written (audit: [] or null)
// under a policy nothing of which writes one (no audit layer, no grounding
// record, no state sink of kind audit) holds for any run: it is refused.
// Under a policy that writes records it is an assertion.
func TestCheckWantNoAuditWriter(t *testing.T) {
	want := func(s string) any {
		var w any
		require.NoError(t, json.Unmarshal([]byte(s), &w))
		return w
	}
	for _, w := range []string{`{"audit": []}`, `{"audit": null, "steps": [{"outcome": "blocked"}]}`} {
		err := scenario.CheckWantNames(want(w), designPlan(), nil)
		require.Error(t, err, w)
		assert.Equal(t, `audit: nothing in the policy writes an audit record (no audit layer, grounding record_grounding nor state sink "audit"), so an empty audit holds for any run`, err.Error())
	}
	p := designPlan()
	p.Chains.Tool = append(p.Chains.Tool, layer("audit", `{}`))
	assert.NoError(t, scenario.CheckWantNames(want(`{"audit": []}`), p, nil))
	p = designPlan()
	p.State = &plan.State{Fields: map[string]plan.StateField{"limit": {Background: []plan.StateSink{{Sink: "audit"}}}}}
	assert.NoError(t, scenario.CheckWantNames(want(`{"audit": []}`), p, nil))
	// A record wanted under such a policy fails the run's comparison, as
	// the case should.
	assert.NoError(t, scenario.CheckWantNames(want(`{"audit": [{"decision": "ok"}]}`), designPlan(), nil))

	// The result's meter is the chat chain's meter's ledger: all zeros
	// under a policy whose chat chain has none.
	p = designPlan()
	p.Chains.Chat = slices.DeleteFunc(p.Chains.Chat, func(l plan.Layer) bool { return l.Use == "meter" })
	err := scenario.CheckWantNames(want(`{"meter": {"usd": 0}}`), p, nil)
	require.Error(t, err)
	assert.Equal(t, `meter: the policy's chat chain has no meter, so the result's meter is all zeros in every run`, err.Error())
	assert.NoError(t, scenario.CheckWantNames(want(`{"meter": {"usd": 0}}`), designPlan(), nil))
}

// Every unknown field and every value of the wrong type is reported in one
// round, each at its place, in the order of the text.
func TestParseReportsEveryUnknownField(t *testing.T) {
	_, err := scenario.Parse([]byte("{\"models\": {\"primary\": [{\"txt\": \"hi\"}]},\n" +
		" \"steps\": [{\"chat\": {\"model\": 5, \"mesages\": [{\"role\": \"user\", \"content\": \"hi\"}]}},\n" +
		"   {\"tool\": {\"nme\": \"refund\", \"args\": {\"anything\": {\"goes\": 1}}}}]}"))
	var se *scenario.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, `s.json:1:26: models.primary[0]: unknown field "txt"; did you mean "text"?
s.json:2:31: steps[0].chat.model: a number (5), where a string is expected
s.json:2:34: steps[0].chat: unknown field "mesages"; did you mean "messages"?
s.json:3:14: steps[1].tool: unknown field "nme"; did you mean "name"?`, se.In("s.json"))
}

// A want counting the executions of a model or tool the result does not
// list (neither declared nor scripted) could never pass: it is refused with
// the names and a did-you-mean.
func TestCheckWantExecutionNames(t *testing.T) {
	s, err := scenario.Parse([]byte(`{"tools": {"wipe": [{"result": 1}]}, "steps": [{"tool": {"name": "wipe", "args": {}}}]}`))
	require.NoError(t, err)
	var w any
	require.NoError(t, json.Unmarshal([]byte(`{"executions": {"models": {"primary": 0}, "tools": {"refnd": 0}}}`), &w))
	err = scenario.CheckWantNames(w, designPlan(), s)
	require.Error(t, err)
	assert.Equal(t, `executions.tools.refnd: the result counts no tool "refnd" (it counts the tools the policy declares and those the scenario scripts: refund, wipe); did you mean "refund"?`, err.Error())
	require.NoError(t, json.Unmarshal([]byte(`{"calls": {"models": {"primery": 0}}}`), &w))
	err = scenario.CheckWantNames(w, designPlan(), s)
	require.Error(t, err)
	assert.Equal(t, `calls.models.primery: the result counts no model "primery" (it counts the models the policy declares and those the scenario scripts: backup, primary); did you mean "primary"?`, err.Error())
	require.NoError(t, json.Unmarshal([]byte(`{"executions": {"models": {"primary": 0, "backup": 1}, "tools": {"refund": 0, "wipe": 1}}, "calls": {"tools": {"wipe": 1}}}`), &w))
	assert.NoError(t, scenario.CheckWantNames(w, designPlan(), s))
}

// Place gives an evaluated scenario's problems the places a caller finds
// for their paths, an unknown field's at its name, and orders them.
func TestErrorPlace(t *testing.T) {
	_, err := scenario.ParseEvaluated([]byte(`{"steps": [{"tool": {"name": "a"}}, {"tool": {"nme": "b"}}]}`))
	var se *scenario.Error
	require.ErrorAs(t, err, &se)
	var asked []string
	se.Place(func(path string) (int, int, bool) {
		asked = append(asked, path)
		return 7, 3, true
	})
	assert.Equal(t, []string{"steps[1].tool.nme"}, asked)
	assert.Equal(t, `s.cue:7:3: steps[1].tool: unknown field "nme"; did you mean "name"?`, se.In("s.cue"))
}

// A model named with a dot (gpt-4.1) is named in a problem's path as CUE
// writes it, quoted, and the problem is placed at the field: in the JSON
// text, and by the path Place asks for.
func TestProblemsUnderADottedNameArePlaced(t *testing.T) {
	_, err := scenario.Parse([]byte("{\"models\": {\"gpt-4.1\": [\n  {\"txt\": \"hi\"}]}, \"steps\": []}"))
	var se *scenario.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, `s.json:2:4: models."gpt-4.1"[0]: unknown field "txt"; did you mean "text"?`, se.In("s.json"))

	_, err = scenario.ParseEvaluated([]byte(`{"models": {"gpt-4.1": [{"txt": "hi"}]}, "steps": []}`))
	require.ErrorAs(t, err, &se)
	var asked []string
	se.Place(func(path string) (int, int, bool) {
		asked = append(asked, path)
		return 7, 3, true
	})
	assert.Equal(t, []string{`models."gpt-4.1"[0].txt`}, asked)
}

// An empty trace under a policy with no tracing layer holds for any run and
// is refused; a host's module, registered or not, may record spans through
// BuildContext.TracerProvider, so under one it is an assertion.
func TestCheckWantEmptyTraceUnderAHostModule(t *testing.T) {
	runtime.Register(runtime.Module{ID: "host_spans_test", Stages: []plan.Stage{plan.StageChat},
		New: func() runtime.Middleware { return passChat{} }})
	want := map[string]any{"trace": []any{}}
	p := &plan.Plan{Chains: plan.Chains{Chat: []plan.Layer{{Use: "retry"}}}}
	err := scenario.CheckWantNames(want, p, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "trace: the policy has no tracing layer")
	for _, use := range []string{"host_spans_test", "not_registered_here", "tracing"} {
		p := &plan.Plan{Chains: plan.Chains{Chat: []plan.Layer{{Use: use}}}}
		assert.NoError(t, scenario.CheckWantNames(want, p, nil), use)
	}
}

// passChat is a host's chat middleware that passes every call on.
type passChat struct{}

func (passChat) WrapChat(next runtime.ChatHandler) runtime.ChatHandler { return next }
