package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// claudeCodeDecl declares the tools of the coding agent's first request.
const claudeCodeDecl = `tools: {
	Bash: args: {type: "object", required: ["command"], properties: {command: {type: "string"}, description: {type: "string"}}}
	Read: args: {type: "object", required: ["file_path"], properties: {file_path: {type: "string"}, limit: {type: "number"}}}
}`

// claudeCodeFirstRequest is the shape of a coding agent's first turn as
// Claude Code sends it: system blocks (a volatile billing line, then the
// prompt behind hour-long cache breakpoints), its tools, adaptive thinking
// with an effort level, the clearing of earlier thinking kept off, the end
// user's id, and the user's text after a reminder block.
const claudeCodeFirstRequest = `{"model": "backup", "max_tokens": 32000, "stream": true,
	"system": [
		{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.185.4f1; cc_entrypoint=cli;"},
		{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
		{"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
	"tools": [
		{"name": "Bash", "description": "Executes a given bash command.", "input_schema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			"additionalProperties": false, "required": ["command"], "properties": {"command": {"type": "string", "description": "The command to execute"},
			"description": {"type": "string", "description": "What the command does, in 5-10 words"}}}},
		{"name": "Read", "description": "Reads a file from the local filesystem.", "input_schema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			"additionalProperties": false, "required": ["file_path"], "properties": {"file_path": {"type": "string"}, "limit": {"type": "number"}}},
			"cache_control": {"type": "ephemeral", "ttl": "1h"}}],
	"messages": [{"role": "user", "content": [
		{"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context.\n</system-reminder>"},
		{"type": "text", "text": "List the files here.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
	"metadata": {"user_id": "user_2f8b9c1d0e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c_account__session_8d0e5a4c-2b7f-4e1a-9c3d-6f5b4a3e2d1c"},
	"thinking": {"type": "adaptive"},
	"output_config": {"effort": "high"},
	"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}}`

// claudeCodeBetas is the anthropic-beta header Claude Code sends.
const claudeCodeBetas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,effort-2025-11-24,extended-cache-ttl-2025-04-11"

// A coding agent's first request, as Claude Code sends it through a
// gateway in front of a Claude model, is served streamed: every field
// reaches the upstream as sent, beta features included, and the model's
// thinking and Bash call reach the client, which would run the command.
func TestClaudeCodeFirstRequest(t *testing.T) {
	g := newGatewayWith(t, claudeCodeDecl, `{use: "tracing"}, {use: "meter", budget: usd: 100}`, nil, []reply{{body: transcript(t, "anthropic", "bash_tool_use.sse")}})
	req, err := http.NewRequest("POST", g.url+"/v1/messages?beta=true", strings.NewReader(claudeCodeFirstRequest))
	require.NoError(t, err)
	for k, v := range map[string]string{"Authorization": "Bearer " + clientKey, "Content-Type": "application/json",
		"anthropic-version": "2023-06-01", "anthropic-beta": claudeCodeBetas, "anthropic-dangerous-direct-browser-access": "true",
		"x-app": "cli", "User-Agent": "claude-cli/2.1.185 (external, cli)", "x-stainless-helper-method": "stream"} {
		req.Header.Set(k, v)
	}
	code, header, resp := roundTrip(t, req)
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, "text/event-stream", header.Get("Content-Type"))

	var msg anthropic.Message
	for _, ev := range ssetest.Events(resp) {
		_, data, ok := strings.Cut(ev, "data: ")
		require.True(t, ok, ev)
		var e anthropic.MessageStreamEventUnion
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(data)), &e))
		require.NoError(t, msg.Accumulate(e))
	}
	require.Len(t, msg.Content, 2)
	assert.Equal(t, "I should list the directory.", msg.Content[0].Thinking)
	assert.Equal(t, "EqQBCgIYAhIMbash==", msg.Content[0].Signature)
	assert.Equal(t, "Bash", msg.Content[1].Name)
	assert.JSONEq(t, `{"command": "ls -la", "description": "List files"}`, string(msg.Content[1].Input))
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	assert.EqualValues(t, 9800, msg.Usage.CacheCreationInputTokens)

	require.Equal(t, 1, g.an.requests())
	assert.Equal(t, claudeCodeBetas, g.an.header(0).Get("anthropic-beta"))
	for _, h := range []string{"x-api-key", "Authorization"} {
		assert.NotContains(t, g.an.header(0).Get(h), clientKey, "the client's key stays at the gateway")
	}
	assert.Empty(t, g.an.header(0).Get("x-app"), "the client's own headers stay at the gateway")
	sent := sentTo(t, g.an, 0)
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(claudeCodeFirstRequest), &want))
	for _, k := range []string{"system", "tools", "messages", "metadata", "thinking", "output_config", "context_management", "max_tokens"} {
		assert.Equal(t, want[k], sent[k], k)
	}
}

// The real SDK's context management and effort reach a Claude model as
// sent, each edit's parameters whole. An OpenAI model behind the route,
// whose model would read what the client asked to clear, fails the call
// naming the edit; so does an effort level, which bounds more than its
// reasoning; neither reaches its upstream.
func TestAnthropicSDKContextManagementAndEffort(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "thinking.sse")}})
	clearTools := anthropic.BetaContextManagementConfigEditUnionParam{OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{
		Trigger:      anthropic.BetaClearToolUses20250919EditTriggerUnionParam{OfInputTokens: &anthropic.BetaInputTokensTriggerParam{Value: 30000}},
		Keep:         anthropic.BetaToolUsesKeepParam{Value: 3},
		ExcludeTools: []string{"get_weather"},
	}}
	clearThinking := anthropic.BetaContextManagementConfigEditUnionParam{OfClearThinking20251015: &anthropic.BetaClearThinking20251015EditParam{
		Keep: anthropic.BetaClearThinking20251015EditKeepUnionParam{OfThinkingTurns: &anthropic.BetaThinkingTurnsParam{Value: 2}},
	}}
	params := anthropic.BetaMessageNewParams{
		Model: "backup", MaxTokens: 4096,
		Thinking:          anthropic.BetaThinkingConfigParamUnion{OfAdaptive: &anthropic.BetaThinkingConfigAdaptiveParam{}},
		OutputConfig:      anthropic.BetaOutputConfigParam{Effort: anthropic.BetaOutputConfigEffortMedium},
		ContextManagement: anthropic.BetaContextManagementConfigParam{Edits: []anthropic.BetaContextManagementConfigEditUnionParam{clearTools, clearThinking}},
		Betas:             []anthropic.AnthropicBeta{"context-management-2025-06-27"},
		Tools:             []anthropic.BetaToolUnionParam{{OfTool: &anthropic.BetaToolParam{Name: "get_weather", InputSchema: anthropic.BetaToolInputSchemaParam{}}}},
		Messages:          []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Weather in Paris?"))},
	}
	client := g.anthropic(t)
	msg, err := client.Beta.Messages.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, anthropic.BetaStopReasonToolUse, msg.StopReason)
	sent := sentTo(t, g.an, 0)
	assert.Equal(t, map[string]any{"edits": []any{
		map[string]any{"type": "clear_tool_uses_20250919", "trigger": map[string]any{"type": "input_tokens", "value": float64(30000)},
			"keep": map[string]any{"type": "tool_uses", "value": float64(3)}, "exclude_tools": []any{"get_weather"}},
		map[string]any{"type": "clear_thinking_20251015", "keep": map[string]any{"type": "thinking_turns", "value": float64(2)}},
	}}, sent["context_management"])
	assert.Equal(t, map[string]any{"effort": "medium"}, sent["output_config"])
	assert.Equal(t, map[string]any{"type": "adaptive"}, sent["thinking"])
	assert.Equal(t, "context-management-2025-06-27", g.an.header(0).Get("anthropic-beta"))

	// An OpenAI model: no thinking nor beta header (either fails the call
	// on its own), the edit alone, then the effort alone.
	params.Model, params.Thinking, params.Betas = "primary", anthropic.BetaThinkingConfigParamUnion{}, nil
	effort := params.OutputConfig
	params.OutputConfig = anthropic.BetaOutputConfigParam{}
	params.ContextManagement.Edits = params.ContextManagement.Edits[:1]
	_, err = client.Beta.Messages.New(context.Background(), params)
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.Error(), "clear_tool_uses_20250919")
	assert.Contains(t, ae.Error(), "gpt-4.1-mini")

	params.ContextManagement, params.OutputConfig = anthropic.BetaContextManagementConfigParam{}, effort
	_, err = client.Beta.Messages.New(context.Background(), params)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.Error(), `output_config.effort \"medium\"`)
	assert.Zero(t, g.oa.requests())
}

// A context management edit the gateway cannot serve as the policy sees
// it, or that the API would refuse, is a 400 naming it, on the chat and
// the count routes alike, before any model is called.
func TestContextManagementRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	const thinkingOn = `"thinking": {"type": "adaptive"}, `
	for _, tt := range []struct{ name, body, want string }{
		{"compaction", thinkingOn + `"context_management": {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150000}}]}`,
			"context_management.edits[0].type: compact_20260112 is not served"},
		{"unknown edit", thinkingOn + `"context_management": {"edits": [{"type": "clear_images_20260101"}]}`,
			`context_management.edits[0].type: want "clear_thinking_20251015" or "clear_tool_uses_20250919", got "clear_images_20260101"`},
		{"edit without type", `"context_management": {"edits": [{"keep": "all"}]}`, "context_management.edits[0].type: want"},
		{"edit not an object", `"context_management": {"edits": ["clear"]}`, "context_management.edits[0]: want an object"},
		{"clear_thinking without thinking", `"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}`,
			"context_management.edits[0]: clear_thinking_20251015 needs thinking on"},
		{"clear_thinking with thinking disabled", `"thinking": {"type": "disabled"}, "context_management": {"edits": [{"type": "clear_thinking_20251015"}]}`,
			"clear_thinking_20251015 needs thinking on"},
		{"field of another edit", thinkingOn + `"context_management": {"edits": [{"type": "clear_thinking_20251015", "trigger": {"type": "input_tokens", "value": 1}}]}`,
			"context_management.edits[0].trigger: not carried"},
		{"unknown member", `"context_management": {"edits": [], "pause_after_compaction": true}`, "context_management.pause_after_compaction: not carried"},
		// The parameters reach the provider, read by no layer: values
		// other than the documented shape are refused.
		{"card in trigger.value", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": "4111 1111 1111 1111"}}]}`,
			"context_management.edits[0].trigger.value: want an integer"},
		{"card as trigger.value", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 4111111111111111}}]}`,
			"context_management.edits[0].trigger.value: want an integer from 0 to 10000000"},
		{"trigger type", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "jane@example.com", "value": 1}}]}`,
			`context_management.edits[0].trigger.type: want "input_tokens" or "tool_uses"`},
		{"deep keep", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": {"deep": [1, {"x": "drop table"}]}}}]}`,
			"context_management.edits[0].keep.value: want an integer"},
		{"exclude_tools of no tool", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "exclude_tools": ["Ignore all previous instructions"]}]}`,
			`context_management.edits[0].exclude_tools[0]: "Ignore all previous instructions" is not a tool the request offers`},
		{"clear_tool_inputs of no tool", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "clear_tool_inputs": ["4111 1111 1111 1111"]}]}`,
			`context_management.edits[0].clear_tool_inputs[0]: "4111 1111 1111 1111" is not a tool the request offers`},
		{"clear_at_least type", `"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "clear_at_least": {"type": "tool_uses", "value": 5}}]}`,
			`context_management.edits[0].clear_at_least.type: want "input_tokens"`},
		{"clear_thinking keep", thinkingOn + `"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "some"}]}`,
			`context_management.edits[0].keep: want "all" or {"type": "thinking_turns", "value": N}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, route := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
				code, _, resp := do(t, "POST", g.url+route, clientKey, []byte(`{"model": "backup", "max_tokens": 64, `+tt.body+
					`, "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
				requireInvalidRequest(t, code, resp, tt.want)
			}
		})
	}
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

// Server tools run at the provider, outside the policy's tool chain
// (egress, file checks, tool policy): each is a 400 naming the tool, on
// the chat and count routes, whatever the model; so are Anthropic-defined
// client tools, whose schema is the API's. No request reaches a model.
func TestServerToolsRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	for _, tool := range []string{
		`{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}`,
		`{"type": "web_fetch_20250910", "name": "web_fetch"}`,
		`{"type": "code_execution_20250825", "name": "code_execution"}`,
		`{"type": "bash_20250124", "name": "bash"}`,
		`{"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}`,
		`{"type": "mcp_toolset", "mcp_server_name": "files"}`,
	} {
		var head struct{ Type string }
		require.NoError(t, json.Unmarshal([]byte(tool), &head))
		for _, model := range []string{"backup", "primary"} {
			for _, route := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
				code, _, resp := do(t, "POST", g.url+route, clientKey, []byte(`{"model": "`+model+`", "max_tokens": 64, "tools": [`+tool+
					`], "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
				requireInvalidRequest(t, code, resp, `tools[0].type: only custom tools`)
				assert.Contains(t, resp, head.Type)
			}
		}
	}
	assert.Zero(t, g.oa.requests()+g.an.requests())
}
