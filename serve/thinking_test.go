package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The signatures and data of the transcripts, as the upstream sent them.
const (
	thinkingSig  = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds/+Fh0Rm4wT=="
	thinkingText = `The user wants the weather in Paris. I should call get_weather with "Paris".`
	redactedData = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmXmqLfcW1E+oA=="
)

// A streamed thinking turn reaches the SDK event by event, blocks in order
// with their indexes; sent back with the tool result on the next turn, the
// thinking block reaches the upstream byte for byte, first in its message.
func TestAnthropicSDKThinkingRoundTrip(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "thinking.sse")}, {body: transcript(t, "anthropic", "text.sse")}})
	client := g.anthropic(t)
	params := anthropic.MessageNewParams{
		Model: "backup", MaxTokens: 4096,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
	}
	stream := client.Messages.NewStreaming(context.Background(), params)
	var msg anthropic.Message
	var seen []string
	for stream.Next() {
		ev := stream.Current()
		require.NoError(t, msg.Accumulate(ev))
		switch ev.Type {
		case "content_block_start":
			seen = append(seen, fmt.Sprintf("start %d %s", ev.Index, ev.ContentBlock.Type))
		case "content_block_delta":
			seen = append(seen, fmt.Sprintf("delta %d %s", ev.Index, ev.Delta.Type))
		case "content_block_stop":
			seen = append(seen, fmt.Sprintf("stop %d", ev.Index))
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, []string{
		"start 0 thinking", "delta 0 thinking_delta", "delta 0 thinking_delta", "delta 0 signature_delta", "stop 0",
		"start 1 text", "delta 1 text_delta", "stop 1",
		"start 2 tool_use", "delta 2 input_json_delta", "stop 2",
	}, seen)
	checkThinkingTurn(t, &msg)
	assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(2048)}, sentTo(t, g.an, 0)["thinking"])

	// The next turn sends the assistant message back, thinking first.
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01A09q90qw90lq917835lq9", "18C, sunny", false)))
	_, err := client.Messages.New(context.Background(), params)
	require.NoError(t, err)
	sent := g.an.body(1)
	block, _ := json.Marshal(map[string]string{"signature": thinkingSig, "thinking": thinkingText, "type": "thinking"})
	var want map[string]any
	require.NoError(t, json.Unmarshal(block, &want))
	msgs := sentTo(t, g.an, 1)["messages"].([]any)
	require.Len(t, msgs, 3)
	content := msgs[1].(map[string]any)["content"].([]any)
	require.Len(t, content, 3)
	assert.Equal(t, want, content[0])
	assert.Equal(t, "text", content[1].(map[string]any)["type"])
	assert.Equal(t, "tool_use", content[2].(map[string]any)["type"])
	// Byte for byte: the signature and the thinking as the model wrote them.
	assert.Contains(t, sent, `"signature":"`+thinkingSig+`"`)
	assert.Contains(t, sent, `"thinking":"The user wants the weather in Paris. I should call get_weather with \"Paris\"."`)
}

// checkThinkingTurn checks the message of the thinking.sse transcript:
// its thinking block, text and tool call, stop reason and usage.
func checkThinkingTurn(t *testing.T, msg *anthropic.Message) {
	t.Helper()
	require.Len(t, msg.Content, 3)
	assert.Equal(t, "thinking", msg.Content[0].Type)
	assert.Equal(t, thinkingText, msg.Content[0].Thinking)
	assert.Equal(t, thinkingSig, msg.Content[0].Signature)
	assert.Equal(t, "Let me check.", msg.Content[1].Text)
	assert.Equal(t, "toolu_01A09q90qw90lq917835lq9", msg.Content[2].ID)
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	assert.EqualValues(t, 512, msg.Usage.InputTokens)
	assert.EqualValues(t, 87, msg.Usage.OutputTokens)
}

// A redacted_thinking block, then a thinking block: both reach the client
// whole, non-streamed and streamed, and the redacted block goes back
// upstream with its data unchanged.
func TestAnthropicSDKRedactedThinking(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "redacted_thinking.sse")},
		{body: transcript(t, "anthropic", "redacted_thinking.sse")}, {body: transcript(t, "anthropic", "text.sse")}})
	client := g.anthropic(t)
	params := anthropic.MessageNewParams{
		Model: "backup", MaxTokens: 4096,
		Thinking: anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{Display: anthropic.ThinkingConfigAdaptiveDisplaySummarized}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	}
	check := func(msg *anthropic.Message) {
		t.Helper()
		require.Len(t, msg.Content, 3)
		assert.Equal(t, "redacted_thinking", msg.Content[0].Type)
		assert.Equal(t, redactedData, msg.Content[0].Data)
		assert.Equal(t, "thinking", msg.Content[1].Type)
		assert.Equal(t, "Answer plainly.", msg.Content[1].Thinking)
		assert.Equal(t, "ErUBCkYIBxgCIkB0m9zQ/r8+Kp3==", msg.Content[1].Signature)
		assert.Equal(t, "Hello.", msg.Content[2].Text)
		assert.EqualValues(t, 41, msg.Usage.OutputTokens)
	}
	msg, err := client.Messages.New(context.Background(), params)
	require.NoError(t, err)
	check(msg)
	assert.Equal(t, map[string]any{"type": "adaptive", "display": "summarized"}, sentTo(t, g.an, 0)["thinking"])

	stream := client.Messages.NewStreaming(context.Background(), params)
	var streamed anthropic.Message
	for stream.Next() {
		require.NoError(t, streamed.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	check(&streamed)

	params.Messages = append(params.Messages, streamed.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Again")))
	_, err = client.Messages.New(context.Background(), params)
	require.NoError(t, err)
	assert.Contains(t, g.an.body(2), `{"type":"redacted_thinking","data":"`+redactedData+`"},{"type":"thinking","thinking":"Answer plainly.","signature":"ErUBCkYIBxgCIkB0m9zQ/r8+Kp3=="},{"type":"text","text":"Hello."}`)
}

// reasoning_effort reaches an OpenAI upstream, and the reasoning tokens
// come back in the usage.
func TestOpenAISDKReasoningEffortReachesTheUpstream(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "primary", ReasoningEffort: shared.ReasoningEffortHigh,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Think hard.")},
	})
	require.NoError(t, err)
	assert.Equal(t, "high", sentTo(t, g.oa, 0)["reasoning_effort"])
}

// Each provider's reasoning control, sent to a model of the other, is a
// 400 naming it, and reaches no upstream.
func TestReasoningControlsRefusedAcrossProviders(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "backup", ReasoningEffort: shared.ReasoningEffortLow,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
	})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Contains(t, oe.RawJSON(), "reasoning_effort")

	_, err = g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "primary", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.Error(), "extended thinking")
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

// A thinking block the gateway cannot send back as it came is a 400 naming
// it; so is a thinking parameter the API would refuse.
func TestThinkingRequestsRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	const user = `{"role": "user", "content": "hi"}`
	for _, tt := range []struct{ name, body, want string }{
		{"thinking block in a user message", `"messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]}]`,
			"messages[0]: content[0]: a thinking block belongs in an assistant message"},
		{"thinking without signature", `"messages": [` + user + `, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}, ` + user + `]`,
			"messages[1]: content[0].signature: required"},
		{"redacted without data", `"messages": [` + user + `, {"role": "assistant", "content": [{"type": "redacted_thinking"}]}, ` + user + `]`,
			"messages[1]: content[0].data: required"},
		{"thinking block with cache_control", `"messages": [` + user + `, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s", "cache_control": {"type": "ephemeral"}}]}, ` + user + `]`,
			"messages[1]: content[0].cache_control"},
		{"thinking block field not carried", `"messages": [` + user + `, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s", "citations": [1]}]}, ` + user + `]`,
			"messages[1].content[0].citations"},
		{"enabled without budget", `"thinking": {"type": "enabled"}, "messages": [` + user + `]`, "thinking.budget_tokens: required"},
		{"budget on adaptive", `"thinking": {"type": "adaptive", "budget_tokens": 1024}, "messages": [` + user + `]`, "thinking.budget_tokens: only type enabled"},
		{"unknown type", `"thinking": {"type": "deep"}, "messages": [` + user + `]`, `thinking.type: want "enabled", "adaptive", "between_tools" or "disabled", got "deep"`},
		{"unknown display", `"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "full"}, "messages": [` + user + `]`, "thinking.display"},
		{"thinking field not carried", `"thinking": {"type": "enabled", "budget_tokens": 1024, "depth": 2}, "messages": [` + user + `]`, "thinking.depth"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 4096, `+tt.body+`}`),
				"anthropic-version", "2023-06-01")
			require.Equal(t, http.StatusBadRequest, code, resp)
			assert.Contains(t, resp, strings.ReplaceAll(tt.want, `"`, `\"`))
		})
	}
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "reasoning_effort": "extreme", "messages": [`+user+`]}`))
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "reasoning_effort")
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

// A layer that holds the output back by lines (pii and redact scanning the
// output) relays clean thinking whole, signature included: a client
// continuing the tool-use turn sends the block back and the upstream gets
// it byte for byte.
func TestThinkingRelayedThroughOutputScanning(t *testing.T) {
	for _, chain := range []string{`{use: "pii", action: "redact"}`, `{use: "pii"}`, `{use: "redact"}`} {
		t.Run(chain, func(t *testing.T) {
			g := newGateway(t, chain, nil, []reply{{body: transcript(t, "anthropic", "thinking.sse")}, {body: transcript(t, "anthropic", "text.sse")},
				{body: transcript(t, "anthropic", "redacted_thinking.sse")}})
			client := g.anthropic(t)
			params := anthropic.MessageNewParams{
				Model: "backup", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
				Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
			}
			msg := streamAnthropic(t, client, params)
			checkThinkingTurn(t, &msg)

			params.Messages = append(params.Messages, msg.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01A09q90qw90lq917835lq9", "18C, sunny", false)))
			_, err := client.Messages.New(context.Background(), params)
			require.NoError(t, err)
			assert.Contains(t, g.an.body(1), `{"type":"thinking","thinking":"The user wants the weather in Paris. I should call get_weather with \"Paris\".","signature":"`+thinkingSig+`"}`)

			// A redacted_thinking block goes out as it came, the thinking block
			// after it too; non-streamed, as blocks.
			got := thinkHi(t, client)
			require.Len(t, got.Content, 3)
			assert.Equal(t, redactedData, got.Content[0].Data)
			assert.Equal(t, "Answer plainly.", got.Content[1].Thinking)
			assert.Equal(t, "Hello.", got.Content[2].Text)
		})
	}
}

// streamAnthropic streams params and returns the message accumulated.
func streamAnthropic(t *testing.T, client *anthropic.Client, params anthropic.MessageNewParams, opts ...anthropicoption.RequestOption) anthropic.Message {
	t.Helper()
	stream := client.Messages.NewStreaming(context.Background(), params, opts...)
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	return msg
}

// thinkHi says hi, thinking on, and returns the whole response.
func thinkHi(t *testing.T, client *anthropic.Client) *anthropic.Message {
	t.Helper()
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "backup", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))},
	})
	require.NoError(t, err)
	return msg
}

// A thinking block holding what the layer masks cannot be masked (its
// signature covers its text): it never reaches the client. Before the
// model's tool calls the turn could not be continued without it, so the
// call fails, naming the layer and the block, before anything is streamed;
// in a turn that ends with text, the block is left out and the text goes.
func TestThinkingWithAFindingThroughOutputScanning(t *testing.T) {
	const secret = "AKIAIOSFODNN7EXAMPLE"
	for _, tt := range []struct{ chain, found, layer string }{
		{`{use: "pii", action: "redact"}`, "ann@example.com", "pii"},
		{`{use: "pii"}`, "ann@example.com", "pii"},
		{`{use: "redact"}`, secret, "redact"},
	} {
		t.Run(tt.chain, func(t *testing.T) {
			dirty := func(name, clean string) string {
				return strings.Replace(transcript(t, "anthropic", name), clean, clean+" Their id is "+tt.found+".", 1)
			}
			g := newGateway(t, tt.chain, nil, []reply{{body: dirty("thinking.sse", "The user wants the weather in Paris.")},
				{body: dirty("redacted_thinking.sse", "Answer plainly.")}})
			code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 4096, "stream": true,
				"thinking": {"type": "enabled", "budget_tokens": 2048}, "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
				"messages": [{"role": "user", "content": "Weather in Paris?"}]}`), "anthropic-version", "2023-06-01")
			assert.NotContains(t, resp, tt.found)
			assert.NotContains(t, resp, "Let me check.", "nothing of the turn went out")
			assert.NotContains(t, resp, "get_weather")
			assert.Contains(t, resp, "thinking block 0 holds")
			assert.Contains(t, resp, tt.layer)
			assert.Equal(t, http.StatusBadGateway, code, resp)

			got := thinkHi(t, g.anthropic(t))
			require.Len(t, got.Content, 2)
			assert.Equal(t, redactedData, got.Content[0].Data)
			assert.Equal(t, "Hello.", got.Content[1].Text)
			assert.NotContains(t, got.RawJSON(), tt.found)
		})
	}
}

// An assistant message's thinking blocks are left out for an OpenAI
// model, which cannot read them; its text goes.
func TestThinkingBlocksLeftOutForOpenAIModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "primary", MaxTokens: 256,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Hi")),
			anthropic.NewAssistantMessage(anthropic.NewRedactedThinkingBlock(redactedData), anthropic.NewThinkingBlock(thinkingSig, "Answer plainly."), anthropic.NewTextBlock("Hello.")),
			anthropic.NewUserMessage(anthropic.NewTextBlock("Again")),
		},
	})
	require.NoError(t, err)
	msgs := sentTo(t, g.oa, 0)["messages"].([]any)
	require.Len(t, msgs, 3)
	assert.Equal(t, map[string]any{"role": "assistant", "content": "Hello."}, msgs[1])
	assert.NotContains(t, g.oa.body(0), thinkingSig)
}

// The signatures of the interleaved transcript's two thinking blocks.
const (
	interleavedSig0 = "EuYBCkQYAiJAQ7nM2kP4sV9hT1cX0bZ8rW3yL6fJ5dA2gE9uK7oN1pR4tS8vY0wB3xC6zD9eF2hG5jI8lM1nO4qP7rU0sA=="
	interleavedSig1 = "EpMCCkYIBRgCKkDx4Lr9QmT2vN8cH5kP1sW7yJ3bG6fA0dE9uZ2oX4iR8tV1nM5qC7wL3hK6jS0gY9pB2eF4aU8zD1mI5rO=="
)

// Interleaved thinking (a thinking block between two tool_use blocks)
// reaches the client in the model's order, each block whole with its
// signature, through every layer that holds tool calls back until their
// arguments are whole (the gateway's own admission of proposed calls,
// redact and pii scanning the output, security reading the calls, a
// guard buffering the response), streamed and not.
func TestInterleavedThinkingKeepsItsPlaceThroughLayersHoldingToolCalls(t *testing.T) {
	for _, chain := range []string{`{use: "tracing"}`, `{use: "redact"}`, `{use: "pii"}`, `{use: "pii", action: "redact"}`,
		`{use: "tracing"}, {use: "security"}`, `{use: "guard", name: "no_passwords", deny: "messages.exists(m, m.content.contains('password'))", message: "no"}`} {
		t.Run(chain, func(t *testing.T) {
			body := transcript(t, "anthropic", "interleaved_thinking.sse")
			g := newGateway(t, chain, nil, []reply{{body: body}, {body: body}})
			client := g.anthropic(t)
			params := anthropic.MessageNewParams{
				Model: "backup", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
				Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris and Lyon?"))},
			}
			stream := client.Messages.NewStreaming(context.Background(), params, anthropicoption.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
			var streamed anthropic.Message
			var starts []string
			for stream.Next() {
				ev := stream.Current()
				require.NoError(t, streamed.Accumulate(ev))
				if ev.Type == "content_block_start" {
					starts = append(starts, fmt.Sprintf("%d %s", ev.Index, ev.ContentBlock.Type))
				}
			}
			require.NoError(t, stream.Err())
			assert.Equal(t, []string{"0 thinking", "1 tool_use", "2 thinking", "3 text", "4 tool_use"}, starts)
			checkInterleavedTurn(t, &streamed)
			assert.Contains(t, g.an.header(0).Get("anthropic-beta"), "interleaved-thinking-2025-05-14")

			whole, err := client.Messages.New(context.Background(), params)
			require.NoError(t, err)
			checkInterleavedTurn(t, whole)
		})
	}
}

// checkInterleavedTurn checks the message of the interleaved_thinking.sse
// transcript: thinking, tool_use, thinking, text, tool_use, in that order,
// the thinking whole with its signature.
func checkInterleavedTurn(t *testing.T, msg *anthropic.Message) {
	t.Helper()
	var types []string
	for _, b := range msg.Content {
		types = append(types, b.Type)
	}
	require.Equal(t, []string{"thinking", "tool_use", "thinking", "text", "tool_use"}, types)
	assert.Equal(t, "The user wants the weather in Paris and in Lyon. Weather first.", msg.Content[0].Thinking)
	assert.Equal(t, interleavedSig0, msg.Content[0].Signature)
	assert.Equal(t, "toolu_01Wx7bQe3RkL9mNpVt2yZc4F", msg.Content[1].ID)
	assert.JSONEq(t, `{"location": "Paris"}`, string(msg.Content[1].Input))
	assert.Equal(t, "Paris is asked for; Lyon next, in the same unit.", msg.Content[2].Thinking)
	assert.Equal(t, interleavedSig1, msg.Content[2].Signature)
	assert.Equal(t, "And Lyon.", msg.Content[3].Text)
	assert.Equal(t, "toolu_01Kd4sHn8TfG2jRwXq6vBm9P", msg.Content[4].ID)
	assert.JSONEq(t, `{"location": "Lyon"}`, string(msg.Content[4].Input))
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	assert.EqualValues(t, 214, msg.Usage.OutputTokens)
}

// interleavedSent is the assistant message of interleaved_thinking.sse as
// the upstream gets it back: every block in the model's order, the
// thinking and signatures byte for byte.
const interleavedSent = `{"role":"assistant","content":[` +
	`{"type":"thinking","thinking":"The user wants the weather in Paris and in Lyon. Weather first.","signature":"` + interleavedSig0 + `"},` +
	`{"type":"tool_use","id":"toolu_01Wx7bQe3RkL9mNpVt2yZc4F","name":"get_weather","input":{"location":"Paris"}},` +
	`{"type":"thinking","thinking":"Paris is asked for; Lyon next, in the same unit.","signature":"` + interleavedSig1 + `"},` +
	`{"type":"text","text":"And Lyon."},` +
	`{"type":"tool_use","id":"toolu_01Kd4sHn8TfG2jRwXq6vBm9P","name":"get_weather","input":{"location":"Lyon"}}]}`

// A tool loop of interleaved thinking goes through the gateway: the client
// sends the assistant turn back with the tool results, and the upstream
// gets its blocks in the model's order, each thinking block with its
// signature, through every layer that reads or rewrites the transcript;
// the turn streamed then sent back whole, and the other way round.
func TestInterleavedThinkingTurnSentBack(t *testing.T) {
	for _, chain := range []string{`{use: "tracing"}`, `{use: "redact"}`, `{use: "pii"}`, `{use: "pii", action: "redact"}`,
		`{use: "tracing"}, {use: "security"}`, `{use: "guard", name: "no_passwords", deny: "messages.exists(m, m.content.contains('password'))", message: "no"}`} {
		t.Run(chain, func(t *testing.T) {
			turn, text := transcript(t, "anthropic", "interleaved_thinking.sse"), transcript(t, "anthropic", "text.sse")
			g := newGateway(t, chain, nil, []reply{{body: turn}, {body: text}, {body: turn}, {body: text}})
			client := g.anthropic(t)
			beta := anthropicoption.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14")
			params := anthropic.MessageNewParams{
				Model: "backup", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
				Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris and Lyon?"))},
			}
			results := anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01Wx7bQe3RkL9mNpVt2yZc4F", "18C, sunny", false),
				anthropic.NewToolResultBlock("toolu_01Kd4sHn8TfG2jRwXq6vBm9P", "16C, cloudy", false))
			back := func(msg *anthropic.Message) anthropic.MessageNewParams {
				p := params
				p.Messages = append(slices.Clone(params.Messages), msg.ToParam(), results)
				return p
			}

			// Streamed, then sent back whole.
			streamed := streamAnthropic(t, client, params, beta)
			checkInterleavedTurn(t, &streamed)
			answer, err := client.Messages.New(context.Background(), back(&streamed), beta)
			require.NoError(t, err, g.an.body(1))
			assert.Equal(t, "Hello! How can I help you today?", answer.Content[0].Text)
			assert.Contains(t, g.an.body(1), interleavedSent)
			msgs := sentTo(t, g.an, 1)["messages"].([]any)
			require.Len(t, msgs, 3)
			assert.Len(t, msgs[2].(map[string]any)["content"], 2, "the results follow")

			// Whole, then sent back streamed.
			whole, err := client.Messages.New(context.Background(), params, beta)
			require.NoError(t, err)
			checkInterleavedTurn(t, whole)
			again := streamAnthropic(t, client, back(whole), beta)
			assert.Equal(t, "Hello! How can I help you today?", again.Content[0].Text)
			assert.Contains(t, g.an.body(3), interleavedSent)
			assert.Contains(t, g.an.header(3).Get("anthropic-beta"), "interleaved-thinking-2025-05-14")
		})
	}
}

// A tool_use block first, thinking after it, and text after a tool_use
// block (once refused or moved) reach the upstream in their place.
func TestBlocksAfterToolUseKeepTheirPlace(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	const user = `{"role": "user", "content": "hi"}`
	assistant := `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"location":"Paris"}},` +
		`{"type":"thinking","thinking":"x","signature":"s"},{"type":"text","text":"a"},` +
		`{"type":"tool_use","id":"t2","name":"get_weather","input":{}},{"type":"text","text":"b"}]}`
	results := `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18C"}, {"type": "tool_result", "tool_use_id": "t2", "content": "16C"}]}`
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 4096, "messages": [`+user+`, `+assistant+`, `+results+`]}`),
		"anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
	assert.Contains(t, g.an.body(0), assistant)
}

// An interleaved turn sent back to an OpenAI model: the order is not the
// API's to keep; its text is the message's content, its calls its
// tool_calls, its thinking left out.
func TestInterleavedTurnSentToOpenAIModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	const user = `{"role": "user", "content": "hi"}`
	assistant := `{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"tool_use","id":"t1","name":"get_weather","input":{"location":"Paris"}},` +
		`{"type":"thinking","thinking":"y","signature":"s2"},{"type":"text","text":"And Lyon."},{"type":"tool_use","id":"t2","name":"get_weather","input":{}}]}`
	results := `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18C"}, {"type": "tool_result", "tool_use_id": "t2", "content": "16C"}]}`
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "primary", "max_tokens": 256, "messages": [`+user+`, `+assistant+`, `+results+`]}`),
		"anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
	msgs := sentTo(t, g.oa, 0)["messages"].([]any)
	require.Len(t, msgs, 4)
	sent := msgs[1].(map[string]any)
	assert.Equal(t, "And Lyon.", sent["content"])
	calls := sent["tool_calls"].([]any)
	require.Len(t, calls, 2)
	assert.Equal(t, "t1", calls[0].(map[string]any)["id"])
	assert.Equal(t, "t2", calls[1].(map[string]any)["id"])
	assert.NotContains(t, g.oa.body(0), `"s2"`)
}
