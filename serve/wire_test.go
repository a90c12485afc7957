package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// anEvent is one event of an Anthropic stream.
func anEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// jsonString is s as a JSON string.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// anToolUseStream is an Anthropic stream of tool_use blocks, each input
// streamed in the fragments given.
func anToolUseStream(usage string, calls ...[]string) string {
	var b strings.Builder
	b.WriteString(anEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}}}`))
	for i, frags := range calls {
		b.WriteString(anEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"get_weather","input":{}}}`, i, i)))
		for _, f := range frags {
			b.WriteString(anEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, quoted(f))))
		}
		b.WriteString(anEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)))
	}
	b.WriteString(anEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":`+usage+`}`))
	b.WriteString(anEvent("message_stop", `{"type":"message_stop"}`))
	return b.String()
}

// oaChunk is one chunk of an OpenAI stream.
func oaChunk(choice string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[` + choice + `]}` + "\n\n"
}

// oaToolCallStream is an OpenAI stream of parallel tool calls, each
// argument string streamed in the fragments given, the calls' fragments
// interleaved.
func oaToolCallStream(calls ...[]string) string {
	var b strings.Builder
	b.WriteString(oaChunk(`{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}`))
	for i := range calls {
		b.WriteString(oaChunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}`, i, i)))
	}
	for n := 0; ; n++ {
		more := false
		for i, frags := range calls {
			if n < len(frags) {
				more = true
				b.WriteString(oaChunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"finish_reason":null}`, i, quoted(frags[n]))))
			}
		}
		if !more {
			break
		}
	}
	b.WriteString(oaChunk(`{"index":0,"delta":{},"finish_reason":"tool_calls"}`))
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// The awkward fragments of two tool inputs: split inside an escape, between
// the halves of a surrogate pair, right after a multi-byte character.
var (
	awkwardLyon  = []string{`{"location": "Ly`, `on \`, `"old\`, `\ town\"", "unit": "\u00`, `e9\ud83d`, `\ude00 é`, `ü"}`}
	awkwardTokyo = []string{`{"loc`, `ation": "東`, `京\n`, `"}`}
	wantLyon     = map[string]any{"location": `Lyon "old\ town"`, "unit": "é😀 éü"}
	wantTokyo    = map[string]any{"location": "東京\n"}
)

// TestAwkwardToolInputFragmentsReachBothSDKs: parallel tool calls whose
// inputs the upstream streams in fragments split inside escapes and
// surrogate pairs reach both SDKs, from both providers, as the inputs the
// model wrote.
func TestAwkwardToolInputFragmentsReachBothSDKs(t *testing.T) {
	an := anToolUseStream(`{"output_tokens":40}`, awkwardLyon, awkwardTokyo)
	oa := oaToolCallStream(awkwardLyon, awkwardTokyo)
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: oa}, {body: oa}, {body: oa}, {body: oa}},
		[]reply{{body: an}, {body: an}, {body: an}, {body: an}})
	ctx := context.Background()
	decode := func(s string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &m), s)
		return m
	}
	for _, model := range []string{"primary", "backup"} {
		aParams := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Tools: []anthropic.ToolUnionParam{anthropicWeatherTool},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather?"))}}
		stream := g.anthropic(t).Messages.NewStreaming(ctx, aParams)
		var msg anthropic.Message
		for stream.Next() {
			require.NoError(t, msg.Accumulate(stream.Current()))
		}
		require.NoError(t, stream.Err(), model)
		require.Len(t, msg.Content, 2, model)
		assert.Equal(t, wantLyon, decode(string(msg.Content[0].Input)), model)
		assert.Equal(t, wantTokyo, decode(string(msg.Content[1].Input)), model)
		whole, err := g.anthropic(t).Messages.New(ctx, aParams)
		require.NoError(t, err, model)
		require.Len(t, whole.Content, 2, model)
		assert.Equal(t, wantLyon, decode(string(whole.Content[0].Input)), model)

		oParams := openai.ChatCompletionNewParams{Model: shared.ChatModel(model), Tools: []openai.ChatCompletionToolUnionParam{weatherTool},
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather?")}}
		os := g.openai(t).Chat.Completions.NewStreaming(ctx, oParams)
		var acc openai.ChatCompletionAccumulator
		for os.Next() {
			acc.AddChunk(os.Current())
		}
		require.NoError(t, os.Err(), model)
		calls := acc.Choices[0].Message.ToolCalls
		require.Len(t, calls, 2, model)
		assert.Equal(t, wantLyon, decode(calls[0].Function.Arguments), model)
		assert.Equal(t, wantTokyo, decode(calls[1].Function.Arguments), model)
		c, err := g.openai(t).Chat.Completions.New(ctx, oParams)
		require.NoError(t, err, model)
		require.Len(t, c.Choices[0].Message.ToolCalls, 2, model)
		assert.Equal(t, wantTokyo, decode(c.Choices[0].Message.ToolCalls[1].Function.Arguments), model)
	}
}

// TestThinkingWithTrickyTextGoesBackUnchanged: a thinking block whose text
// holds what JSON encoders escape differently (<, >, &, U+2028, a
// backslash, a tab) and a redacted block reach the upstream with the values
// the model wrote.
func TestThinkingWithTrickyTextGoesBackUnchanged(t *testing.T) {
	const text = "if a < b && c > d\u2028then \\ \"x\"\t☃ 😀"
	const sig = "ErUBCkYIBRgCIkB+/=="
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 4096,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048), Tools: []anthropic.ToolUnionParam{anthropicWeatherTool},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Weather?")),
			anthropic.NewAssistantMessage(anthropic.NewThinkingBlock(sig, text), anthropic.NewRedactedThinkingBlock("EmwKAhgB+/=="),
				anthropic.NewToolUseBlock("toolu_1", map[string]any{"location": "Lyon"}, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "sunny", false)),
		}})
	require.NoError(t, err)
	content := sentTo(t, g.an, 0)["messages"].([]any)[1].(map[string]any)["content"].([]any)
	require.Len(t, content, 3)
	assert.Equal(t, map[string]any{"type": "thinking", "thinking": text, "signature": sig}, content[0])
	assert.Equal(t, map[string]any{"type": "redacted_thinking", "data": "EmwKAhgB+/=="}, content[1])
}

// TestToolChoiceAcrossProviders: each tool choice mode reaches the other
// provider's model as its own mode.
func TestToolChoiceAcrossProviders(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "tracing"}`, []reply{text("openai"), text("openai"), text("openai"), text("openai")},
		[]reply{text("anthropic"), text("anthropic"), text("anthropic")})
	ctx := context.Background()
	for _, tc := range []struct {
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   any
	}{
		{openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}, map[string]any{"type": "auto"}},
		{openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, map[string]any{"type": "any"}},
		{openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}, map[string]any{"type": "none"}},
	} {
		_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup", ToolChoice: tc.choice,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
		require.NoError(t, err)
	}
	for i, want := range []any{map[string]any{"type": "auto"}, map[string]any{"type": "any"}, map[string]any{"type": "none"}} {
		assert.Equal(t, want, sentTo(t, g.an, i)["tool_choice"], "call %d", i)
	}
	for _, tc := range []anthropic.ToolChoiceUnionParam{
		{OfAuto: &anthropic.ToolChoiceAutoParam{}}, {OfAny: &anthropic.ToolChoiceAnyParam{}}, {OfNone: &anthropic.ToolChoiceNoneParam{}},
		anthropic.ToolChoiceParamOfTool("get_weather"),
	} {
		_, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "primary", MaxTokens: 64, ToolChoice: tc,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}, Tools: []anthropic.ToolUnionParam{anthropicWeatherTool}})
		require.NoError(t, err)
	}
	for i, want := range []any{"auto", "required", "none", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}} {
		assert.Equal(t, want, sentTo(t, g.oa, i)["tool_choice"], "call %d", i)
	}
}

// TestUnfinishedAnswersAcrossProviders: an answer cut at the output bound
// is length to an OpenAI client and max_tokens to an Anthropic one,
// whichever provider cut it.
func TestUnfinishedAnswersAcrossProviders(t *testing.T) {
	oa := oaChunk(`{"index":0,"delta":{"role":"assistant","content":"One, two"},"finish_reason":null}`) +
		oaChunk(`{"index":0,"delta":{},"finish_reason":"length"}`) + "data: [DONE]\n\n"
	an := anEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`) +
		anEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"One, two"}}`) +
		anEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4}}`) +
		anEvent("message_stop", `{"type":"message_stop"}`)
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: oa}, {body: oa}}, []reply{{body: an}, {body: an}})
	ctx := context.Background()
	for _, model := range []string{"primary", "backup"} {
		c, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: shared.ChatModel(model), MaxCompletionTokens: openai.Int(4),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count.")}})
		require.NoError(t, err)
		assert.Equal(t, "length", c.Choices[0].FinishReason, model)
		assert.Equal(t, "One, two", c.Choices[0].Message.Content, model)
		m, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 4,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count."))}})
		require.NoError(t, err)
		assert.Equal(t, anthropic.StopReasonMaxTokens, m.StopReason, model)
	}
}

// TestUpstreamRefusalReachesTheOtherSDK: an upstream's 400 reaches a
// client of the other API as its own invalid request error, with the
// upstream's message.
func TestUpstreamRefusalReachesTheOtherSDK(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{status: 400, body: transcript(t, "openai", "400_context_length.json")}},
		[]reply{{status: 400, body: transcript(t, "anthropic", "400_prompt_too_long.json")}})
	ctx := context.Background()
	_, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "primary", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), `"type":"invalid_request_error"`)
	assert.Contains(t, ae.RawJSON(), "context length")
	_, err = g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Equal(t, "invalid_request_error", oe.Type)
	assert.Contains(t, oe.Message, "prompt is too long")
}

// TestImagesAcrossProviders: an image from base64 data or a URL reaches
// the other provider's model as its own kind of image.
func TestImagesAcrossProviders(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "tracing"}`, []reply{text("openai")}, []reply{text("anthropic")})
	ctx := context.Background()
	_, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "primary", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What?"),
			anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="),
			anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/a.png"}))}})
	require.NoError(t, err)
	parts := sentTo(t, g.oa, 0)["messages"].([]any)[0].(map[string]any)["content"].([]any)
	require.Len(t, parts, 3)
	assert.Equal(t, "data:image/png;base64,iVBORw0KGgo=", parts[1].(map[string]any)["image_url"].(map[string]any)["url"])
	assert.Equal(t, "https://example.com/a.png", parts[2].(map[string]any)["image_url"].(map[string]any)["url"])

	_, err = g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/jpeg;base64,/9j/4AAQ", Detail: "auto"}),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/b.png"}),
		})}})
	require.NoError(t, err)
	blocks := sentTo(t, g.an, 0)["messages"].([]any)[0].(map[string]any)["content"].([]any)
	require.Len(t, blocks, 3)
	assert.Equal(t, map[string]any{"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}, blocks[1].(map[string]any)["source"])
	assert.Equal(t, map[string]any{"type": "url", "url": "https://example.com/b.png"}, blocks[2].(map[string]any)["source"])
}

// TestSystemPromptsAcrossProviders: OpenAI system and developer messages
// reach a Claude model as its system prompt; a system message in the
// middle of the conversation, which a Claude model has no place for, joins
// the system prompt, as docs/serve.md says.
func TestSystemPromptsAcrossProviders(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{text("anthropic"), text("anthropic")})
	ctx := context.Background()
	_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.DeveloperMessage("Answer in French."),
			openai.UserMessage("hi")}})
	require.NoError(t, err)
	sent := sentTo(t, g.an, 0)
	assert.Contains(t, fmt.Sprint(sent["system"]), "Be brief.")
	assert.Contains(t, fmt.Sprint(sent["system"]), "Answer in French.")
	assert.Len(t, sent["messages"], 1)

	_, err = g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi"), openai.AssistantMessage("Hello."),
			openai.SystemMessage("From now on, answer in French."), openai.UserMessage("How are you?")}})
	require.NoError(t, err)
	sent = sentTo(t, g.an, 1)
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "From now on, answer in French."}}, sent["system"])
	assert.Len(t, sent["messages"], 3, "the turns around it are sent in their order")
}

// TestOpenAIUsageDetailsReachBothSDKs: cached and reasoning tokens of an
// OpenAI model reach an OpenAI client, streamed with include_usage and
// whole; without include_usage no usage chunk is sent.
func TestOpenAIUsageDetailsReachBothSDKs(t *testing.T) {
	body := transcript(t, "openai", "parallel_tool_calls.sse")
	body = strings.Replace(body, `"cached_tokens":0`, `"cached_tokens":64`, 1)
	g := newGatewayWith(t, `settings: allow_undeclared_tools: true`, `{use: "tracing"}`,
		[]reply{{body: body}, {body: body}, {body: body}, {body: body}}, nil)
	ctx := context.Background()
	p := openai.ChatCompletionNewParams{Model: "primary", Tools: []openai.ChatCompletionToolUnionParam{weatherTool},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	c, err := g.openai(t).Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	assert.EqualValues(t, 82, c.Usage.PromptTokens)
	assert.EqualValues(t, 64, c.Usage.PromptTokensDetails.CachedTokens)
	assert.EqualValues(t, 24, c.Usage.CompletionTokensDetails.ReasoningTokens)
	for _, include := range []bool{true, false} {
		q := p
		q.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(include)}
		s := g.openai(t).Chat.Completions.NewStreaming(ctx, q)
		usages := 0
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			if s.Current().JSON.Usage.Valid() && s.Current().Usage.TotalTokens > 0 {
				usages++
			}
			acc.AddChunk(s.Current())
		}
		require.NoError(t, s.Err())
		if include {
			assert.Equal(t, 1, usages)
			assert.EqualValues(t, 64, acc.Usage.PromptTokensDetails.CachedTokens)
			assert.EqualValues(t, 24, acc.Usage.CompletionTokensDetails.ReasoningTokens)
		} else {
			assert.Zero(t, usages)
		}
	}
	m, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "primary", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool}})
	require.NoError(t, err)
	assert.EqualValues(t, 64, m.Usage.CacheReadInputTokens)
	assert.EqualValues(t, 82-64, m.Usage.InputTokens)
}

// TestMeterCountsPromptCacheTokens: the tokens an Anthropic model read
// from its prompt cache and wrote to it are input tokens to the meter
// (the API leaves them out of input_tokens), whole and streamed, whichever
// SDK asked.
func TestMeterCountsPromptCacheTokens(t *testing.T) {
	stopped := reply{body: transcript(t, "anthropic", "stop_sequence.sse")}
	g := newGateway(t, `{use: "meter", budget: usd: 100}`, nil, []reply{stopped, stopped, stopped})
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count to five."))}}
	_, err := g.anthropic(t).Messages.New(ctx, params)
	require.NoError(t, err)
	s := g.anthropic(t).Messages.NewStreaming(ctx, params)
	for s.Next() {
	}
	require.NoError(t, s.Err())
	c, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to five.")}})
	require.NoError(t, err)
	assert.EqualValues(t, 1820, c.Usage.PromptTokens)
	assert.EqualValues(t, 300, c.Usage.PromptTokensDetails.CachedTokens)
	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_tokens_total{direction="input",model="backup",tenant="acme"} 5460`)
	assert.Contains(t, m, `agentc_serve_tokens_total{direction="output",model="backup",tenant="acme"} 18`)
	assert.Contains(t, m, `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"} 0.01665`)
}

// TestToolCallWithoutArguments: a tool called without arguments (the
// upstream streams an empty input) reaches each SDK as an empty object.
func TestToolCallWithoutArguments(t *testing.T) {
	an := anToolUseStream(`{"output_tokens":10}`, []string{""})
	oa := oaToolCallStream([]string{"{}"})
	g := newGatewayWith(t, `settings: allow_undeclared_tools: true`, `{use: "tracing"}`, []reply{{body: oa}, {body: oa}}, []reply{{body: an}, {body: an}})
	ctx := context.Background()
	for _, model := range []string{"primary", "backup"} {
		c, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: shared.ChatModel(model),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, Tools: []openai.ChatCompletionToolUnionParam{weatherTool}})
		require.NoError(t, err, model)
		assert.Equal(t, "{}", c.Choices[0].Message.ToolCalls[0].Function.Arguments, model)
		m, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}, Tools: []anthropic.ToolUnionParam{anthropicWeatherTool}})
		require.NoError(t, err, model)
		assert.JSONEq(t, "{}", string(m.Content[0].Input), model)
	}
}

// TestEarlierCallArgumentsAClaudeModelCannotTake: an OpenAI client's
// earlier tool call whose arguments are JSON but not an object (its API
// takes any string) was sent to a Claude model as a tool_use input that is
// no object; the call fails with a 400 permanent naming the call, and
// behind fallback the OpenAI model serves it. Empty arguments are no
// arguments: an empty input.
func TestEarlierCallArgumentsAClaudeModelCannotTake(t *testing.T) {
	g := newGatewayWith(t, `settings: allow_undeclared_tools: true`, `{use: "fallback", models: ["backup", "primary"], when: "request.model == 'primary'"}`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	history := func(model, args string) []byte {
		return []byte(`{"model": "` + model + `", "messages": [{"role": "user", "content": "hi"},
			{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ` + quoted(args) + `}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]}`)
	}
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, history("backup", `["Lyon"]`))
	require.Equal(t, http.StatusBadRequest, code, resp)
	typ, ecode, _, msg := openAIError(t, resp)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Equal(t, "permanent", ecode)
	assert.Contains(t, msg, "tool call call_1: arguments are JSON but not an object")
	assert.Zero(t, g.an.requests(), "the Claude model was not sent an input that is no object")

	code, _, resp = do(t, "POST", g.url+"/v1/chat/completions", clientKey, history("primary", `["Lyon"]`))
	require.Equal(t, http.StatusOK, code, resp)
	assert.Contains(t, resp, `"model":"primary"`, "behind fallback, the OpenAI model serves it")
	assert.Contains(t, g.oa.body(0), `"arguments":"[\"Lyon\"]"`)

	code, _, resp = do(t, "POST", g.url+"/v1/chat/completions", clientKey, history("backup", ``))
	require.Equal(t, http.StatusOK, code, resp)
	assert.Contains(t, g.an.body(0), `"input":{}`)
}

// TestImagesKeepTheirPlaceAmongTexts: the texts and images of a user
// message reach either provider's model in the client's order, so each
// label stays with its image; an OpenAI model got all the text first,
// then the images.
func TestImagesKeepTheirPlaceAmongTexts(t *testing.T) {
	text := func(p string) reply { return reply{body: transcript(t, p, "text.sse")} }
	g := newGateway(t, `{use: "tracing"}`, []reply{text("openai"), text("openai")}, []reply{text("anthropic"), text("anthropic")})
	ctx := context.Background()
	oaParts := []openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("Image A:"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png"}),
		openai.TextContentPart("Image B:"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
		openai.TextContentPart("Which is larger?"),
	}
	anBlocks := []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("Image A:"),
		anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/a.png"}), anthropic.NewTextBlock("Image B:"),
		anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="), anthropic.NewTextBlock("Which is larger?")}
	for _, model := range []string{"primary", "backup"} {
		_, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: shared.ChatModel(model),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(oaParts)}})
		require.NoError(t, err, model)
		_, err = g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anBlocks...)}})
		require.NoError(t, err, model)
	}
	// order lists the parts of the first message sent: a text, or an
	// image by its URL or its data.
	order := func(u *upstream, i int) []string {
		var got []string
		for _, p := range sentTo(t, u, i)["messages"].([]any)[0].(map[string]any)["content"].([]any) {
			p := p.(map[string]any)
			switch p["type"] {
			case "text":
				got = append(got, p["text"].(string))
			case "image_url":
				got = append(got, "image "+p["image_url"].(map[string]any)["url"].(string))
			case "image":
				src := p["source"].(map[string]any)
				got = append(got, fmt.Sprintf("image %v%v", src["url"], src["data"]))
			}
		}
		return got
	}
	want := []string{"Image A:", "image https://example.com/a.png", "Image B:", "image data:image/png;base64,iVBORw0KGgo=", "Which is larger?"}
	for i := range 2 {
		assert.Equal(t, want, order(g.oa, i), "OpenAI model, call %d", i)
	}
	want[1], want[3] = "image https://example.com/a.png<nil>", "image <nil>iVBORw0KGgo="
	for i := range 2 {
		assert.Equal(t, want, order(g.an, i), "Claude model, call %d", i)
	}
}
