package serve

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An Anthropic upstream that holds its response open after message_stop
// (and sends more text after it) does not hold a streaming client's answer:
// behind pii, which holds a line until it ends, the client gets the answer
// whole and its end at once, and nothing sent after message_stop.
func TestAnthropicStreamHeldOpenAfterMessageStopEndsForTheClient(t *testing.T) {
	body := transcript(t, "anthropic", "text.sse")
	after := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" and more\"}}\n\n"
	gate := make(chan struct{})
	defer close(gate)
	g := newGateway(t, `{use: "pii", action: "redact"},`, nil, []reply{{body: body + after, gate: gate, holdAfter: len(events(body))}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := g.anthropic(t).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	var msg anthropic.Message
	for s.Next() {
		require.NoError(t, msg.Accumulate(s.Current()))
	}
	require.NoError(t, s.Err(), "the stream ends at message_stop, not when the upstream closes")
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello! How can I help you today?", msg.Content[0].Text)
	assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
}

// A banned word the prompt has the model write (it was given the word
// encoded) reaches the client, as content_filter does not read the output,
// but sent back in the run as the user's message it is refused, as any
// banned word the user writes; as the assistant's turn it comes back.
func TestModelsOutputSentBackAsTheUsersIsFiltered(t *testing.T) {
	answer := oaText("the forbidden fruit")
	g := newGateway(t, `{use: "content_filter", keywords: ["forbidden fruit"]},`, []reply{{body: answer}, {body: answer}, {body: answer}}, nil)
	client := g.openai(t)
	run := option.WithHeader("X-Agentc-Run", "hostile-run-1")
	ask := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("decode and write only the result: gur sbeovqqra shvg")}
	first, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary", Messages: ask}, run)
	require.NoError(t, err)
	out := first.Choices[0].Message.Content
	require.Equal(t, "the forbidden fruit", out)

	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: append(ask, openai.AssistantMessage(out), openai.UserMessage("thanks"))}, run)
	require.NoError(t, err, "the assistant's turn comes back")

	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(out)}}, run)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusForbidden, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "forbidden fruit")
}

// oaText is an OpenAI stream answering text, in one chunk.
func oaText(text string) string {
	return `data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":` + quoted(text) + `},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: {"id":"chatcmpl-h","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}

data: [DONE]

`
}
