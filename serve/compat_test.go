package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fidelity of the gateway to the official SDKs: what a client sends
// reaches the upstream (or is translated, across providers), what the
// upstream answers reaches the client, and what the gateway cannot carry is
// refused with a 400 naming the field rather than dropped.

// sentTo decodes the i-th request body an upstream received.
func sentTo(t *testing.T, u *upstream, i int) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(u.body(i)), &m))
	return m
}

func TestOpenAISDKRequestReachesTheUpstream(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.DeveloperMessage("Answer in JSON."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is in these?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png"}),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
			}),
		},
		Tools:               []openai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice:          openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END", "STOP"}},
		Seed:                openai.Int(7),
		User:                openai.String("u-42"),
		MaxCompletionTokens: openai.Int(300),
		Temperature:         openai.Float(0.2),
		TopP:                openai.Float(0.9),
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Strict: openai.Bool(true),
				Schema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}}}},
	})
	require.NoError(t, err)
	got := sentTo(t, g.oa, 0)
	assert.Equal(t, map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, got["tool_choice"])
	assert.Equal(t, []any{"END", "STOP"}, got["stop"])
	assert.EqualValues(t, 7, got["seed"])
	assert.Equal(t, "u-42", got["user"])
	assert.EqualValues(t, 300, got["max_tokens"], "a server other than OpenAI's gets max_tokens")
	assert.EqualValues(t, 0.2, got["temperature"])
	assert.EqualValues(t, 0.9, got["top_p"])
	assert.Equal(t, "json_schema", got["response_format"].(map[string]any)["type"])
	assert.Equal(t, true, got["response_format"].(map[string]any)["json_schema"].(map[string]any)["strict"])
	msgs := got["messages"].([]any)
	assert.Equal(t, "system", msgs[0].(map[string]any)["role"])
	parts := msgs[1].(map[string]any)["content"].([]any)
	require.Len(t, parts, 3)
	assert.Equal(t, "https://example.com/a.png", parts[1].(map[string]any)["image_url"].(map[string]any)["url"])
	assert.Equal(t, "data:image/png;base64,iVBORw0KGgo=", parts[2].(map[string]any)["image_url"].(map[string]any)["url"])
}

// TestOpenAIMessageNamesReachTheUpstream: the authors of a group chat's
// messages (name, on system, developer, user and assistant messages) reach
// an OpenAI-shaped upstream; an Anthropic model, whose API has no author
// field, is served the same chat without them.
func TestOpenAIMessageNamesReachTheUpstream(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	system := openai.SystemMessage("Two agents plan a trip.")
	system.OfSystem.Name = openai.String("moderator")
	developer := openai.DeveloperMessage("Answer briefly.")
	developer.OfDeveloper.Name = openai.String("admin")
	alice := openai.UserMessage("Where do we go?")
	alice.OfUser.Name = openai.String("alice")
	bob := openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Somewhere warm.")})
	bob.OfUser.Name = openai.String("bob")
	planner := openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		Name: openai.String("planner"),
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"location":"Lyon"}`}}}}}}
	critic := openai.AssistantMessage("Lyon, then.")
	critic.OfAssistant.Name = openai.String("critic")
	msgs := []openai.ChatCompletionMessageParamUnion{system, developer, alice, bob, planner,
		openai.ToolMessage("sunny", "call_1"), critic, openai.UserMessage("Agreed?")}

	for _, model := range []string{"primary", "backup"} {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: shared.ChatModel(model), Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
		require.NoError(t, err, model)
	}

	var got []any
	for _, m := range sentTo(t, g.oa, 0)["messages"].([]any) {
		got = append(got, m.(map[string]any)["role"], m.(map[string]any)["name"])
	}
	assert.Equal(t, []any{"system", "moderator", "system", "admin", "user", "alice", "user", "bob",
		"assistant", "planner", "tool", nil, "assistant", "critic", "user", nil}, got, "sent %s", g.oa.body(0))

	sent := g.an.body(0)
	for _, name := range []string{"moderator", "admin", "alice", "bob", "planner", "critic"} {
		assert.NotContains(t, sent, name)
	}
	assert.Contains(t, sent, "Somewhere warm.")
	assert.Contains(t, sent, "Lyon, then.")
}

// TestPolicySeesMessageNames: a guard reads a message's author (m.name).
func TestPolicySeesMessageNames(t *testing.T) {
	g := newGateway(t, `{use: "guard", name: "no_mallory", deny: "messages.exists(m, m.name == 'mallory')"}`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	for _, tt := range []struct {
		name string
		code int
	}{{"mallory", http.StatusForbidden}, {"alice", http.StatusOK}} {
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
			[]byte(`{"model": "primary", "messages": [{"role": "user", "name": "`+tt.name+`", "content": "hi"}]}`))
		assert.Equal(t, tt.code, code, resp)
	}
	assert.Equal(t, 1, g.oa.requests())
}

func TestAnthropicSDKRequestReachesTheUpstream(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "backup", MaxTokens: 300,
		System: []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather?"),
				anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="),
				anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/a.png"})),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"location": "Lyon"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "no such place", true)),
		},
		Tools:         []anthropic.ToolUnionParam{anthropicWeatherTool},
		ToolChoice:    anthropic.ToolChoiceParamOfTool("get_weather"),
		StopSequences: []string{"END"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("u-42")},
	})
	require.NoError(t, err)
	got := sentTo(t, g.an, 0)
	assert.Equal(t, map[string]any{"type": "tool", "name": "get_weather"}, got["tool_choice"])
	assert.Equal(t, []any{"END"}, got["stop_sequences"])
	assert.EqualValues(t, 300, got["max_tokens"])
	assert.Equal(t, map[string]any{"user_id": "u-42"}, got["metadata"])
	msgs := got["messages"].([]any)
	require.Len(t, msgs, 3)
	blocks := msgs[0].(map[string]any)["content"].([]any)
	require.Len(t, blocks, 3)
	assert.Equal(t, "base64", blocks[1].(map[string]any)["source"].(map[string]any)["type"])
	assert.Equal(t, "url", blocks[2].(map[string]any)["source"].(map[string]any)["type"])
	result := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	assert.Equal(t, true, result["is_error"])
	t.Logf("sent: %s", g.an.body(0))
}

// TestFieldsNotCarriedAreRefused: a field the gateway cannot carry to the
// upstream is a 400 naming it, before any model is called; the same field
// at its API default (or null) changes nothing and is served.
func TestFieldsNotCarriedAreRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}, {body: transcript(t, "openai", "text.sse")}},
		[]reply{{body: transcript(t, "anthropic", "text.sse")}, {body: transcript(t, "anthropic", "text.sse")}})
	const oaMsgs = `"messages": [{"role": "user", "content": "hi"}]`
	const anMsgs = `"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]`
	for _, tt := range []struct {
		name, route, body, field string
		header                   []string
	}{
		{"openai logprobs", "chat", `"logprobs": true, "top_logprobs": 3`, "logprobs", nil},
		{"openai audio output", "chat", `"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}`, "audio", nil},
		{"openai prediction", "chat", `"prediction": {"type": "content", "content": "x"}`, "prediction", nil},
		{"openai web search", "chat", `"web_search_options": {}`, "web_search_options", nil},
		{"openai store", "chat", `"store": true`, "store", nil},
		{"openai service tier", "chat", `"service_tier": "priority"`, "service_tier", nil},
		{"openai legacy functions", "chat", `"functions": [{"name": "f"}]`, "functions", nil},
		{"openai unknown field", "chat", `"chat_template_kwargs": {"x": 1}`, "chat_template_kwargs", nil},
		{"openai audio input", "chat", `"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]`, "messages[0]: content[0].type", nil},
		{"anthropic thinking without a budget", "messages", `"thinking": {"type": "enabled"}`, "thinking.budget_tokens", nil},
		{"anthropic output effort for an OpenAI model", "messages", `"output_config": {"effort": "low"}`, "output_config.effort", nil},
		{"anthropic output effort unknown", "messages", `"output_config": {"effort": "extreme"}`, "output_config.effort: want", nil},
		{"anthropic thinking block in a user message", "messages", `"max_tokens": 64, "messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "hmm", "signature": "EqQBCgIYAhIM"}]}]`, "messages[0]: content[0]: a thinking block belongs in an assistant message", nil},
		{"anthropic redacted thinking block without data", "messages", `"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "redacted_thinking"}]}, {"role": "user", "content": "again"}]`, "messages[1]: content[0].data: required", nil},
		{"anthropic cache_control of another type", "messages", `"cache_control": {"type": "persistent"}`, "cache_control: type", nil},
		{"anthropic cache_control ttl", "messages", `"system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "2d"}}]`, "system: [0].cache_control: ttl", nil},
		{"anthropic service tier", "messages", `"service_tier": "standard_only"`, "service_tier", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, url, msgs := tt.body, g.url+"/v1/chat/completions", oaMsgs
			header := append([]string{}, tt.header...)
			if tt.route == "messages" {
				url, msgs = g.url+"/v1/messages", anMsgs
				header = append(header, "anthropic-version", "2023-06-01")
			}
			if !strings.Contains(body, `"messages"`) {
				body = strings.TrimPrefix(body+", "+msgs, ", ")
			}
			code, _, resp := do(t, "POST", url, clientKey, []byte(`{"model": "primary", `+body+`}`), header...)
			requireInvalidRequest(t, code, resp, tt.field)
		})
	}
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no refused request reached an upstream")

	// The same fields at their defaults are served.
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", `+oaMsgs+
		`, "logprobs": false, "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {}, "store": false, "n": 1, "user": null}`))
	require.Equal(t, http.StatusOK, code, resp)
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", `+anMsgs+
		`, "thinking": {"type": "disabled"}, "tool_choice": {"type": "auto", "disable_parallel_tool_use": false}}`), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
}

// TestNestedFieldsNotCarriedAreRefused: the rule of the top-level fields
// holds inside messages, content parts, tools and tool_choice: a field the
// gateway cannot carry is a 400 naming its whole path, and at its default
// (or null) it is served.
func TestNestedFieldsNotCarriedAreRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	const tool = `{"name": "get_weather", "input_schema": {"type": "object"}`
	for _, tt := range []struct {
		name, route, body, field string
	}{
		{"anthropic tool eager_input_streaming", "messages", `"tools": [` + tool + `, "eager_input_streaming": true}]`, "tools[0].eager_input_streaming"},
		{"anthropic tool input_examples", "messages", `"tools": [` + tool + `}, ` + tool + `, "input_examples": [{"location": "Lyon"}]}]`, "tools[1].input_examples"},
		{"anthropic text block citations", "messages", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [{"type": "text", "text": "Lyon", "citations": [{"type": "char_location", "cited_text": "Lyon", "document_index": 0, "start_char_index": 0, "end_char_index": 4}]}]}]`, "messages[2].content[0].citations"},
		{"anthropic tool result block", "messages", `"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny", "citations": [{"type": "char_location"}]}]}]}]`, "messages[0].content[0].content[0].citations"},
		{"anthropic cache_control scope", "messages", `"system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "scope": "global"}}]`, "system[0].cache_control.scope"},
		{"anthropic image source", "messages", `"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png", "detail": "high"}}]}]`, "messages[0].content[0].source.detail"},
		{"anthropic tool_choice", "messages", `"tool_choice": {"type": "auto", "strict": true}`, "tool_choice.strict"},
		{"anthropic metadata", "messages", `"metadata": {"user_id": "u-1", "session": "s-1"}`, "metadata.session"},
		{"anthropic document title", "messages", `"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}, "title": "t"}]}]`, `messages[0].content[0].title: not carried`},
		{"anthropic document citations", "messages", `"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}, "citations": {"enabled": true}}]}]`, `messages[0].content[0].citations: not carried`},
		{"anthropic document content source", "messages", `"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "content", "content": "x"}}]}]`, `messages[0].content[0].source.content: not carried`},
		{"anthropic message field", "messages", `"messages": [{"role": "user", "content": "hi", "name": "ann"}]`, "messages[0].name"},
		{"openai user refusal", "chat", `"messages": [{"role": "user", "content": "hi", "refusal": "I can't."}]`, "messages[0].refusal"},
		{"openai user refusal part", "chat", `"messages": [{"role": "user", "content": [{"type": "refusal", "refusal": "I can't."}]}]`, "messages[0]: content[0]: a refusal part belongs in an assistant message, not a user message"},
		{"openai tool refusal part", "chat", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": [{"type": "refusal", "refusal": "no"}]}]`, "messages[2]: content[0]: a refusal part belongs in an assistant message, not a tool message"},
		{"openai assistant audio", "chat", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "audio": {"id": "audio_1"}}, {"role": "user", "content": "again"}]`, "messages[1].audio"},
		{"openai assistant function_call", "chat", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}, {"role": "function", "name": "f", "content": "x"}]`, "messages[1].function_call"},
		{"openai tool message name", "chat", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "x", "name": "f"}]`, "messages[2].name"},
		{"openai tool_calls on a user message", "chat", `"messages": [{"role": "user", "content": "hi", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]`, "messages[0].tool_calls"},
		{"openai text part field", "chat", `"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]`, "messages[0].content[0].cache_control"},
		{"openai file part", "chat", `"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]`, `messages[0].content[0].file.file_id: not carried`},
		{"openai tool call field", "chat", `"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", "strict": true}}]}, {"role": "tool", "tool_call_id": "c1", "content": "x"}]`, "messages[1].tool_calls[0].function.strict"},
		{"openai tool field", "chat", `"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}, "cache_control": {"type": "ephemeral"}}]`, "tools[0].cache_control"},
		{"openai json_schema description", "chat", `"response_format": {"type": "json_schema", "json_schema": {"name": "a", "description": "An answer.", "schema": {"type": "object"}}}`, "response_format.json_schema.description"},
		{"openai tool_choice", "chat", `"tool_choice": {"type": "function", "function": {"name": "f"}, "allowed_tools": {"mode": "auto"}}`, "tool_choice.allowed_tools"},
		{"several", "chat", `"messages": [{"role": "user", "content": "hi", "name": "ann", "weight": 2, "mood": "glad"}, {"role": "assistant", "content": "ok", "audio": {"id": "a"}}]`, "messages[0].mood, messages[0].weight, messages[1].audio: not carried"},
		{"an escaped key", "chat", `"messages": [{"role": "user", "content": "hi", "w\u0065ight": 2}]`, "messages[0].weight"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url, body := g.url+"/v1/chat/completions", tt.body
			var header []string
			if tt.route == "messages" {
				url = g.url + "/v1/messages"
				header = []string{"anthropic-version", "2023-06-01"}
				body = `"max_tokens": 64, ` + body
			}
			if !strings.Contains(body, `"messages"`) {
				body += `, "messages": [{"role": "user", "content": "hi"}]`
			}
			code, _, resp := do(t, "POST", url, clientKey, []byte(`{"model": "primary", `+body+`}`), header...)
			requireInvalidRequest(t, code, resp, tt.field)
		})
	}
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no refused request reached an upstream")

	// The same fields at their defaults (null, false, empty) are served, as
	// an SDK replaying an assistant message sends them.
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "messages": [
		{"role": "user", "content": [{"type": "text", "text": "hi"}], "name": ""},
		{"role": "assistant", "content": "Hello", "refusal": null, "audio": null, "function_call": null, "tool_calls": []},
		{"role": "user", "content": "again"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "x-anything": 1}, "strict": false}}],
		"stream_options": null, "metadata": {"any": "thing"}}`))
	require.Equal(t, http.StatusOK, code, resp)
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 64, "messages": [
		{"role": "user", "content": [{"type": "text", "text": "hi", "citations": null}]},
		{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"deep": {"citations": 1}}}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny", "citations": []}]}]}],
		"tools": [`+tool+`, "eager_input_streaming": false, "input_examples": []}]}`), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
}

// Anthropic's structured output (output_config.format) reaches both
// providers: as itself, and as OpenAI's json_schema response format.
func TestAnthropicOutputFormatReachesBothProviders(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	for _, model := range []string{"backup", "primary"} {
		_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 300,
			Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather?"))},
			Metadata:     anthropic.MetadataParam{UserID: anthropic.String("u-7")},
			OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: map[string]any{"type": "object"}}},
		})
		require.NoError(t, err)
	}
	an := sentTo(t, g.an, 0)
	assert.Equal(t, map[string]any{"type": "json_schema", "schema": map[string]any{"type": "object"}}, an["output_config"].(map[string]any)["format"])
	oa := sentTo(t, g.oa, 0)
	rf := oa["response_format"].(map[string]any)
	assert.Equal(t, "json_schema", rf["type"])
	assert.Equal(t, map[string]any{"type": "object"}, rf["json_schema"].(map[string]any)["schema"])
	assert.Equal(t, "u-7", oa["user"], "metadata.user_id is OpenAI's user")
}

// Upstream failures reach the SDKs as their own error types.
func TestUpstreamErrorsParseInTheSDKs(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`,
		[]reply{{status: 429, header: map[string]string{"retry-after": "20"}, body: transcript(t, "openai", "429.json")}},
		[]reply{{status: 529, body: transcript(t, "anthropic", "529.json")}})
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusTooManyRequests, oe.StatusCode)
	assert.Equal(t, "rate_limit_error", oe.Type)
	assert.Equal(t, "20", oe.Response.Header.Get("Retry-After"))
	_, err = g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadGateway, ae.StatusCode)
	assert.Equal(t, anthropic.ErrorType("overloaded_error"), ae.Type(), "the upstream's own type: it was overloaded")
}

// A strict tool and one tool call at a time (openai-agents sends strict
// tools by default) reach both providers: OpenAI's function.strict and
// parallel_tool_calls, Anthropic's strict and disable_parallel_tool_use.
func TestStrictToolsAndSerialCallsReachBothProviders(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	strict := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Strict: openai.Bool(true),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"location"}, "additionalProperties": false,
			"properties": map[string]any{"location": map[string]any{"type": "string"}}}})
	for _, model := range []string{"primary", "backup"} {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages:          []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Lyon?")},
			Tools:             []openai.ChatCompletionToolUnionParam{strict},
			ParallelToolCalls: openai.Bool(false)})
		require.NoError(t, err)
	}
	oa := sentTo(t, g.oa, 0)
	assert.Equal(t, true, oa["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)["strict"])
	assert.Equal(t, false, oa["parallel_tool_calls"])
	an := sentTo(t, g.an, 0)
	assert.Equal(t, true, an["tools"].([]any)[0].(map[string]any)["strict"])
	assert.Equal(t, map[string]any{"type": "auto", "disable_parallel_tool_use": true}, an["tool_choice"])
}

// claudeCodeBody is a Messages request as Claude Code style clients send
// it: prompt-cache breakpoints on the request, the system prompt, the
// tools and the last blocks, a strict tool, one tool call at a time.
const claudeCodeBody = `{"model": %q, "max_tokens": 64, "cache_control": {"type": "ephemeral"},
	"system": [{"type": "text", "text": "You are a coding agent."}, {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
	"tools": [{"name": "get_weather", "input_schema": {"type": "object"}, "strict": true, "cache_control": {"type": "ephemeral"}}],
	"tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
	"messages": [
		{"role": "user", "content": [{"type": "text", "text": "Weather?", "cache_control": {"type": "ephemeral"}}]},
		{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Lyon"}, "cache_control": {"type": "ephemeral"}}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny", "cache_control": {"type": "ephemeral"}}]}]}]}`

// Prompt-cache breakpoints and beta features reach an Anthropic model as
// they were sent. To an OpenAI model, which caches by itself, the
// breakpoints are dropped (a hint: the output is the same) and beta
// features, which it cannot honour, fail the request with a 400.
func TestCacheControlAndBetasReachAnthropic(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, fmt.Appendf(nil, claudeCodeBody, "backup"),
		"anthropic-version", "2023-06-01", "anthropic-beta", "fine-grained-tool-streaming-2025-05-14, token-efficient-tools-2025-02-19")
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, "fine-grained-tool-streaming-2025-05-14,token-efficient-tools-2025-02-19", g.an.header(0).Get("anthropic-beta"))
	an := sentTo(t, g.an, 0)
	eph, hour := map[string]any{"type": "ephemeral"}, map[string]any{"type": "ephemeral", "ttl": "1h"}
	assert.Equal(t, eph, an["cache_control"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "You are a coding agent."},
		map[string]any{"type": "text", "text": "Be brief.", "cache_control": hour}}, an["system"])
	tool := an["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, eph, tool["cache_control"])
	assert.Equal(t, true, tool["strict"])
	assert.Equal(t, map[string]any{"type": "auto", "disable_parallel_tool_use": true}, an["tool_choice"])
	msgs := an["messages"].([]any)
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		block := m.(map[string]any)["content"].([]any)[0].(map[string]any)
		assert.Equal(t, eph, block["cache_control"], "messages[%d]", i)
	}

	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, fmt.Appendf(nil, claudeCodeBody, "primary"), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
	assert.NotContains(t, g.oa.body(0), "cache_control")
	oa := sentTo(t, g.oa, 0)
	// The system blocks run together, as a Claude model and the guards
	// read them.
	assert.Equal(t, "You are a coding agent.Be brief.", oa["messages"].([]any)[0].(map[string]any)["content"])
	assert.Equal(t, false, oa["parallel_tool_calls"])
	assert.Equal(t, true, oa["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)["strict"])

	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, fmt.Appendf(nil, claudeCodeBody, "primary"),
		"anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "anthropic-beta: interleaved-thinking-2025-05-14")
	assert.Equal(t, 1, g.oa.requests(), "the request with beta features never reached the OpenAI upstream")
}

// The stop sequence the model stopped at, the tokens written to the
// prompt cache and the upstream's request id reach the Anthropic SDK,
// whole and streamed; the OpenAI SDK gets the request id too.
func TestStopSequenceCacheWritesAndRequestIDComeBack(t *testing.T) {
	stopped := reply{body: transcript(t, "anthropic", "stop_sequence.sse"), header: map[string]string{"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"}}
	text := reply{body: transcript(t, "openai", "text.sse"), header: map[string]string{"x-request-id": "req_4f2a9c"}}
	g := newGateway(t, `{use: "tracing"}`, []reply{text, text}, []reply{stopped, stopped})
	params := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64, StopSequences: []string{"FOUR"},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count to five."))}}
	var raw *http.Response
	msg, err := g.anthropic(t).Messages.New(context.Background(), params, anthropicoption.WithResponseInto(&raw))
	require.NoError(t, err)
	assert.Equal(t, "req_011CSHoEeqs5C35K2UUqR7Fy", raw.Header.Get("request-id"))
	check := func(msg *anthropic.Message) {
		assert.Equal(t, anthropic.StopReasonStopSequence, msg.StopReason)
		assert.Equal(t, "FOUR", msg.StopSequence)
		assert.Equal(t, int64(20), msg.Usage.InputTokens)
		assert.Equal(t, int64(1500), msg.Usage.CacheCreationInputTokens)
		assert.Equal(t, int64(300), msg.Usage.CacheReadInputTokens)
		assert.Equal(t, int64(6), msg.Usage.OutputTokens)
	}
	check(msg)

	stream := g.anthropic(t).Messages.NewStreaming(context.Background(), params, anthropicoption.WithResponseInto(&raw))
	var acc anthropic.Message
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "req_011CSHoEeqs5C35K2UUqR7Fy", raw.Header.Get("request-id"))
	check(&acc)

	oaParams := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	_, err = g.openai(t).Chat.Completions.New(context.Background(), oaParams, option.WithResponseInto(&raw))
	require.NoError(t, err)
	assert.Equal(t, "req_4f2a9c", raw.Header.Get("x-request-id"))
	oaStream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), oaParams, option.WithResponseInto(&raw))
	for oaStream.Next() {
	}
	require.NoError(t, oaStream.Err())
	assert.Equal(t, "req_4f2a9c", raw.Header.Get("x-request-id"))
}

// requireInvalidRequest checks a 400 whose error body, in either API's
// shape, is an invalid_request_error naming field.
func requireInvalidRequest(t *testing.T, code int, resp, field string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, code, resp)
	var e struct {
		Error struct{ Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &e))
	assert.Equal(t, "invalid_request_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, field)
}

// TestToolResultErrorReachesAnOpenAIModel: an Anthropic client's tool result
// marked is_error, sent to an OpenAI model (whose tool message has no error
// flag), reaches it saying it is an error rather than as a tool's answer.
func TestToolResultErrorReachesAnOpenAIModel(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "primary", MaxTokens: 256,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Lyon and Paris?")),
			anthropic.NewAssistantMessage(
				anthropic.NewToolUseBlock("toolu_1", map[string]any{"location": "Lyon"}, "get_weather"),
				anthropic.NewToolUseBlock("toolu_2", map[string]any{"location": "Paris"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "12C, rain", false),
				anthropic.NewToolResultBlock("toolu_2", "weather service unreachable", true)),
		},
		Tools: []anthropic.ToolUnionParam{anthropicWeatherTool},
	})
	require.NoError(t, err)
	sent := sentMessages(t, g.oa.body(0))
	require.Len(t, sent, 4)
	assert.Equal(t, "12C, rain", sent[2].Content)
	assert.Equal(t, "toolu_2", sent[3].ToolCallID)
	assert.Equal(t, "error: weather service unreachable", sent[3].Content)
}

// TestOutputBoundIsServedOrRefused: a request asking for no output tokens
// (max_tokens 0, which both APIs refuse) or, on the Messages route, for no
// bound at all (the API requires one) is a 400 naming the field, never
// served unbounded or with a bound of the gateway's choosing.
func TestOutputBoundIsServedOrRefused(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	ctx := context.Background()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	for _, p := range []openai.ChatCompletionNewParams{
		{Model: "primary", Messages: user, MaxTokens: openai.Int(0)},
		{Model: "primary", Messages: user, MaxCompletionTokens: openai.Int(0)},
	} {
		_, err := g.openai(t).Chat.Completions.New(ctx, p)
		var oe *openai.Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
		assert.Regexp(t, `^max_(completion_)?tokens: must be at least 1, got 0$`, oe.Message)
	}
	_, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 0,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), `"type":"invalid_request_error"`)
	assert.Contains(t, ae.RawJSON(), "max_tokens: must be at least 1, got 0")

	code, _, body := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "messages": [{"role": "user", "content": "hi"}]}`))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "max_tokens: required")
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no model was called")
}

// TestJSONObjectFormatOnAClaudeModelIsRefused: OpenAI's json_object format
// asked of a Claude model, which takes structured output only with a
// schema, is a 400 naming it rather than an answer in free text.
func TestJSONObjectFormatOnAClaudeModelIsRefused(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "backup", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Give me JSON.")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Equal(t, "permanent", oe.Code)
	assert.Contains(t, oe.Message, "response_format json_object without a schema")
	assert.Zero(t, g.an.requests())
}

// TestToolChoiceOfAToolNamedAsAModeIsRefused: a tool choice forcing a tool
// whose name is a tool choice mode (a tool called "none", "auto" or
// "required") is a 400 naming tool_choice, on both routes, rather than
// reaching the model as that mode (forcing the tool "none" forbade every
// tool call); a named choice of another type than function is refused too.
func TestToolChoiceOfAToolNamedAsAModeIsRefused(t *testing.T) {
	g := newGatewayWith(t, `settings: allow_undeclared_tools: true`, `{use: "tracing"}`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	ctx := context.Background()
	for _, name := range []string{"none", "auto", "required"} {
		for _, model := range []string{"primary", "backup"} {
			_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: shared.ChatModel(model),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
					Name: name, Parameters: shared.FunctionParameters{"type": "object"}})},
				ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: name})})
			status, body := apiError(t, err)
			assert.Equal(t, http.StatusBadRequest, status, "%s on %s", name, model)
			assert.Contains(t, body["error"].(map[string]any)["message"], "tool_choice.function.name: "+strconv.Quote(name))

			_, err = g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
				Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
				Tools:      []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: name, InputSchema: anthropic.ToolInputSchemaParam{}}}},
				ToolChoice: anthropic.ToolChoiceParamOfTool(name)})
			status, body = apiError(t, err)
			assert.Equal(t, http.StatusBadRequest, status, "%s on %s", name, model)
			assert.Equal(t, "invalid_request_error", body["error"].(map[string]any)["type"])
			assert.Contains(t, body["error"].(map[string]any)["message"], "tool_choice.name: "+strconv.Quote(name))
		}
	}
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}],
		"tools": [{"type": "function", "function": {"name": "get_weather"}}], "tool_choice": {"type": "custom", "function": {"name": "get_weather"}}}`))
	requireInvalidRequest(t, code, resp, "tool_choice.custom.name: required")
	// A custom choice of a function tool: the provider would be asked to
	// force another tool.
	code, _, resp = do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}],
		"tools": [{"type": "function", "function": {"name": "get_weather"}}], "tool_choice": {"type": "custom", "custom": {"name": "get_weather"}}}`))
	requireInvalidRequest(t, code, resp, `tool_choice.type: "custom" forces a custom tool`)
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no refused request reached an upstream")

	// A tool named "any" (Anthropic's mode, not the call model's) is forced
	// as itself.
	_, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		Tools:      []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "any", InputSchema: anthropic.ToolInputSchemaParam{}}}},
		ToolChoice: anthropic.ToolChoiceParamOfTool("any")})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"type": "tool", "name": "any"}, sentTo(t, g.an, 0)["tool_choice"])
}

// TestOpenAIMetadataStaysAtTheGateway: an OpenAI client's metadata is the
// policy's, never sent upstream; a user_id key in it, which the providers
// would send on as the end user's id (OpenAI's user, Anthropic's
// metadata.user_id), is a 400 naming it unless it is the request's user.
func TestOpenAIMetadataStaysAtTheGateway(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	ctx := context.Background()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	for _, p := range []openai.ChatCompletionNewParams{
		{Model: "primary", Messages: user, Metadata: shared.Metadata{"user_id": "crm-7731", "team": "billing"}},
		{Model: "backup", Messages: user, Metadata: shared.Metadata{"user_id": "crm-7731"}},
		{Model: "primary", Messages: user, Metadata: shared.Metadata{"user_id": "crm-7731"}, User: openai.String("u-42")},
	} {
		_, err := g.openai(t).Chat.Completions.New(ctx, p)
		status, body := apiError(t, err)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Contains(t, body["error"].(map[string]any)["message"], "metadata.user_id")
	}
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no refused request reached an upstream")

	for _, model := range []string{"primary", "backup"} {
		_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: shared.ChatModel(model), Messages: user,
			Metadata: shared.Metadata{"user_id": "u-42", "team": "billing"}, User: openai.String("u-42")})
		require.NoError(t, err, model)
	}
	oa, an := g.oa.body(0), g.an.body(0)
	assert.Equal(t, "u-42", sentTo(t, g.oa, 0)["user"])
	assert.Equal(t, map[string]any{"user_id": "u-42"}, sentTo(t, g.an, 0)["metadata"])
	for _, sent := range []string{oa, an} {
		assert.NotContains(t, sent, "billing", "the metadata is not sent")
	}
}

// TestTrailingAssistantMessageAcrossProviders: a conversation ending with an
// assistant message means another thing to each API: an Anthropic model
// continues it (a prefill: the answer is the rest of that message), an
// OpenAI model answers it with a message of its own. Across providers the
// call fails with a 400 permanent naming it (behind fallback, the next
// model is tried), rather than an answer the client would join wrongly to
// its prefill; to the client's own provider it is relayed as sent.
func TestTrailingAssistantMessageAcrossProviders(t *testing.T) {
	g := newGateway(t, `{use: "fallback", models: ["primary", "backup"], when: "request.model == 'primary'"}`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}, {body: transcript(t, "anthropic", "text.sse")}})
	ctx := context.Background()
	prefill := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("The answer, as JSON?")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock(`{"answer":`))}
	msg, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "primary", MaxTokens: 64, Messages: prefill})
	require.NoError(t, err)
	assert.Equal(t, "backup", msg.Model, "the OpenAI model cannot continue the prefill: the next model serves it")
	assert.Zero(t, g.oa.requests())
	assert.Contains(t, g.an.body(0), `{\"answer\":`)

	params := openai.ChatCompletionNewParams{Model: "backup", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("Say more."), openai.AssistantMessage("Here is more"), openai.SystemMessage("Be brief.")}}
	_, err = g.openai(t).Chat.Completions.New(ctx, params)
	status, body := apiError(t, err)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "permanent", body["error"].(map[string]any)["code"])
	assert.Contains(t, body["error"].(map[string]any)["message"], "ends with an assistant message")
	assert.Equal(t, 1, g.an.requests(), "the Anthropic model was not asked")

	params.Model = "primary"
	_, err = g.openai(t).Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	assert.Contains(t, g.oa.body(0), `"content":"Here is more"`)
	_, err = g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 64, Messages: prefill})
	require.NoError(t, err)
	assert.Equal(t, 2, g.an.requests())
}

// TestWhatAModelCannotHonourFallsOver: a call asking what the model's
// provider cannot honour (extended thinking or beta features of an OpenAI
// model; reasoning_effort or a json_object format of a Claude model) fails
// with a 400 permanent, and behind fallback the next model, which can,
// serves it.
func TestWhatAModelCannotHonourFallsOver(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "fallback", models: ["primary", "backup"], when: "request.model == 'primary'"}`,
		nil, []reply{text("anthropic"), text("anthropic")})
	for _, tt := range []struct {
		name, body string
		header     []string
	}{
		{"thinking", `"thinking": {"type": "enabled", "budget_tokens": 1024}`, nil},
		{"beta", "", []string{"anthropic-beta", "interleaved-thinking-2025-05-14"}},
	} {
		body := `{"model": "primary", "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}]`
		if tt.body != "" {
			body += ", " + tt.body
		}
		code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(body+"}"), append([]string{"anthropic-version", "2023-06-01"}, tt.header...)...)
		require.Equal(t, http.StatusOK, code, "%s: %s", tt.name, resp)
		assert.Contains(t, resp, `"model":"backup"`, tt.name)
	}
	assert.Contains(t, g.an.body(0), `"thinking":{"type":"enabled","budget_tokens":1024}`)
	assert.Equal(t, "interleaved-thinking-2025-05-14", g.an.header(1).Get("anthropic-beta"))
	assert.Zero(t, g.oa.requests())

	g = newGateway(t, `{use: "fallback", models: ["backup", "primary"], when: "request.model == 'backup'"}`,
		[]reply{text("openai"), text("openai")}, nil)
	for _, p := range []openai.ChatCompletionNewParams{
		{ReasoningEffort: shared.ReasoningEffortLow},
		{ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}},
	} {
		p.Model, p.Messages = "backup", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
		c, err := g.openai(t).Chat.Completions.New(context.Background(), p)
		require.NoError(t, err)
		assert.Equal(t, "primary", c.Model)
	}
	assert.Contains(t, g.oa.body(0), `"reasoning_effort":"low"`)
	assert.Contains(t, g.oa.body(1), `"response_format":{"type":"json_object"}`)
	assert.Zero(t, g.an.requests())
}

// TestAbsurdOutputBoundsAreRefused: an output bound no model can honour
// (2^63-1, or anything over MaxOutputTokens) is a 400 naming the field, not
// passed upstream (nor into a budget's estimate of the call, where
// 2^63-1 plus the input's tokens wraps around to a negative count); a
// bound that is not an integer is a 400 naming the field too.
func TestAbsurdOutputBoundsAreRefused(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	ctx := context.Background()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	huge := int64(math.MaxInt64)
	for _, n := range []int64{huge, MaxOutputTokens + 1} {
		for _, p := range []openai.ChatCompletionNewParams{
			{Model: "primary", Messages: user, MaxTokens: openai.Int(n)},
			{Model: "primary", Messages: user, MaxCompletionTokens: openai.Int(n)},
		} {
			_, err := g.openai(t).Chat.Completions.New(ctx, p)
			var oe *openai.Error
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
			assert.Equal(t, "invalid_request_error", oe.Type)
			assert.Regexp(t, fmt.Sprintf(`^max_(completion_)?tokens: at most %d, got %d`, MaxOutputTokens, n), oe.Message)
		}
		antUser := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
		// (The SDK asks for a stream when the bound is this large.)
		stream := g.anthropic(t).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: n, Messages: antUser})
		for stream.Next() {
		}
		var ae *anthropic.Error
		require.ErrorAs(t, stream.Err(), &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		assert.Contains(t, ae.RawJSON(), fmt.Sprintf("max_tokens: at most %d, got %d", MaxOutputTokens, n))
		_, err := g.anthropic(t).Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "backup", Messages: antUser,
			Thinking: anthropic.ThinkingConfigParamOfEnabled(n)})
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		assert.Contains(t, ae.RawJSON(), fmt.Sprintf("thinking.budget_tokens: at most %d, got %d", MaxOutputTokens, n))
		_, err = g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 1024, Messages: antUser,
			Thinking: anthropic.ThinkingConfigParamOfEnabled(n)})
		require.ErrorAs(t, err, &ae)
		assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
		assert.Contains(t, ae.RawJSON(), "thinking.budget_tokens: at most")
	}
	for _, bad := range []string{`1.5`, `1e3`, `"100"`, `9223372036854775808`} {
		code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
			[]byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": `+bad+`}`))
		requireInvalidRequest(t, code, body, "max_completion_tokens")
		code, _, body = do(t, "POST", g.url+"/v1/messages", clientKey,
			[]byte(`{"model": "backup", "messages": [{"role": "user", "content": "hi"}], "max_tokens": `+bad+`}`), "anthropic-version", "2023-06-01")
		requireInvalidRequest(t, code, body, "max_tokens")
	}
	assert.Zero(t, g.oa.requests()+g.an.requests(), "no model was called")

	g = newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "primary", Messages: user, MaxCompletionTokens: openai.Int(MaxOutputTokens)})
	require.NoError(t, err)
	assert.EqualValues(t, MaxOutputTokens, sentTo(t, g.oa, 0)["max_tokens"], "the bound itself is served")
	stream := g.anthropic(t).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: MaxOutputTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	assert.EqualValues(t, MaxOutputTokens, sentTo(t, g.an, 0)["max_tokens"])
}

// TestTwoDifferentOutputBoundsAreRefused: max_tokens and
// max_completion_tokens both sent, with different values, were served
// with the second alone, the first dropped although the client may have
// meant it; they are a 400 naming both. The same value twice is one bound.
func TestTwoDifferentOutputBoundsAreRefused(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	ctx := context.Background()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "primary", Messages: user,
		MaxTokens: openai.Int(50), MaxCompletionTokens: openai.Int(4000)})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Contains(t, oe.Message, "max_tokens (50) and max_completion_tokens (4000)")
	assert.Zero(t, g.oa.requests(), "no model was called")

	_, err = g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "primary", Messages: user,
		MaxTokens: openai.Int(50), MaxCompletionTokens: openai.Int(50)})
	require.NoError(t, err)
	assert.EqualValues(t, 50, sentTo(t, g.oa, 0)["max_tokens"])
}
