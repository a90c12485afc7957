package predicate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEvalChatCallModel(t *testing.T) {
	temp, seed := 0.0, int64(42)
	vars := &ChatVars{
		Request: ChatRequest{Model: "m",
			Tools: []ToolDef{{Name: "search", Description: "searches the web"}, {Name: "refund"}},
			Params: Params{Temperature: &temp, Seed: &seed, Stop: []string{"END"}, ToolChoice: "auto",
				ResponseFormat: "json_object", Metadata: map[string]string{"tenant": "acme"}},
		},
		Response: ChatResponse{FinishReason: "tool_calls",
			Usage: Usage{InputTokens: 10, CachedInputTokens: 6, CacheWriteInputTokens: 3, OutputTokens: 4, ReasoningTokens: 1},
			ToolCalls: []ToolCall{
				{ID: "call_1", Name: "refund", Arguments: json.RawMessage(`{"amount":150,"order":{"id":"A1"}}`)},
				{ID: "call_2", Name: "now"},
			}},
		HasResponse: true,
	}
	after := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	tests := []struct {
		src     string
		want    bool
		wantErr string
	}{
		{"request.tools.exists(t, t.name == 'refund')", true, ""},
		{"request.tools[0].description.contains('web') && size(request.tools) == 2", true, ""},
		{"has(request.params.temperature) && request.params.temperature == 0.0", true, ""},
		{"!has(request.params.top_p) && request.params.top_p == 0.0", true, ""},
		{"request.params.seed == 42 && 'END' in request.params.stop", true, ""},
		{"request.params.tool_choice == 'auto' && request.params.response_format == 'json_object'", true, ""},
		{"request.params.metadata.tenant == 'acme' && has(request.params.metadata)", true, ""},
		{"response.finish_reason == 'tool_calls'", true, ""},
		{"response.usage.cached_input_tokens == 6 && response.usage.reasoning_tokens == 1", true, ""},
		{"has(response.usage.cache_write_input_tokens) && response.usage.cache_write_input_tokens + response.usage.cached_input_tokens < response.usage.input_tokens", true, ""},
		{"response.tool_calls.exists(c, c.name == 'refund' && c.args.amount > 100)", true, ""},
		{"response.tool_calls[0].args.order.id == 'A1' && response.tool_calls[0].id == 'call_1'", true, ""},
		{"size(response.tool_calls[1].args) == 0 && !has(response.tool_calls[1].args)", true, ""},
		{"response.tool_calls.all(c, c.name != 'delete')", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := mustCompile(t, after, tt.src).Eval(context.Background(), vars)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	bad := &ChatVars{HasResponse: true, Response: ChatResponse{ToolCalls: []ToolCall{{ID: "c", Name: "x", Arguments: json.RawMessage(`[1]`)}}}}
	_, err := mustCompile(t, after, "response.tool_calls[0].args.a == 1").Eval(context.Background(), bad)
	require.ErrorContains(t, err, `tool call "c" (x): arguments are not a JSON object`)

	empty := &ChatVars{HasResponse: true}
	got, err := mustCompile(t, after, "size(request.tools) == 0 && size(response.tool_calls) == 0 && size(request.params.stop) == 0 && size(request.params.metadata) == 0 && response.finish_reason == ''").
		Eval(context.Background(), empty)
	require.NoError(t, err)
	assert.True(t, got, "unset lists, maps and strings read as empty")
}

func TestCheckChatCallModelTypos(t *testing.T) {
	before := mustEnv(t, EnvConfig{Stage: Chat})
	after := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	for _, src := range []string{
		"request.tools.exists(t, t.nmae == 'refund')",
		"request.params.temprature > 0.5",
		"request.params.seed == 'x'",
		"request.params.stop == 'END'",
		"request.toolz.size() > 0",
	} {
		_, iss := before.Check(src)
		assert.Equal(t, []string{"cel/type"}, ruleIDs(iss), src)
	}
	for _, src := range []string{
		"response.tool_calls.exists(c, c.nme == 'refund')",
		"response.finish_reasn == 'stop'",
		"response.tool_calls[0].args == 'x'",
	} {
		_, iss := after.Check(src)
		assert.Equal(t, []string{"cel/type"}, ruleIDs(iss), src)
	}
	_, iss := before.Check("response.finish_reason == 'stop'")
	assert.Equal(t, []string{"cel/type"}, ruleIDs(iss), "response is an after-phase variable")
}
