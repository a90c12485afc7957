package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openAIRefusal is an OpenAI stream in which the model refuses: refusal
// deltas, then finish reason stop, as the API sends one.
const openAIRefusal = `data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"refusal":"I can't help"},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"refusal":" with that."},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}

data: [DONE]

`

// anthropicStopping is an Anthropic stream whose text "Hello.." ends with
// stop reason reason.
func anthropicStopping(reason string) string {
	return `event: message_start
data: {"type":"message_start","message":{"id":"msg_r1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello.."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"` + reason + `","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`
}

// openAIAnswer is what an OpenAI client of the gateway gets, streamed or
// not: the message's content and refusal, and the finish reason.
type openAIAnswer struct{ content, refusal, finish string }

// askOpenAI asks model through the OpenAI route, streaming or not.
func (g *gateway) askOpenAI(t *testing.T, model string, stream bool) openAIAnswer {
	t.Helper()
	params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}
	if !stream {
		c, err := g.openai(t).Chat.Completions.New(context.Background(), params)
		require.NoError(t, err)
		require.Len(t, c.Choices, 1)
		m := c.Choices[0].Message
		return openAIAnswer{m.Content, m.Refusal, c.Choices[0].FinishReason}
	}
	s := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		require.True(t, acc.AddChunk(s.Current()), "a chunk does not accumulate: %s", s.Current().RawJSON())
	}
	require.NoError(t, s.Err())
	require.Len(t, acc.Choices, 1)
	m := acc.Choices[0].Message
	return openAIAnswer{m.Content, m.Refusal, acc.Choices[0].FinishReason}
}

// askAnthropic asks model through the Messages route, streaming or not,
// and returns the message.
func (g *gateway) askAnthropic(t *testing.T, model string, stream bool, stop ...string) anthropic.Message {
	t.Helper()
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}, StopSequences: stop}
	if !stream {
		msg, err := g.anthropic(t).Messages.New(context.Background(), params)
		require.NoError(t, err)
		return *msg
	}
	s := g.anthropic(t).Messages.NewStreaming(context.Background(), params)
	var msg anthropic.Message
	for s.Next() {
		require.NoError(t, msg.Accumulate(s.Current()))
	}
	require.NoError(t, s.Err())
	return msg
}

// The chains the finish tests run under: the typical one, and one whose
// redact layer holds the text back by lines and releases it itself.
var finishChains = map[string]string{"typical": typicalChain, "redact": `{use: "redact", patterns: ["secret-[0-9]+"]},`}

// An OpenAI model's refusal reaches an OpenAI client as a refusal
// (message.refusal, delta.refusal), ended as the API ends one (stop), and
// an Anthropic client as text with stop reason refusal.
func TestOpenAIRefusalReachesEachClientAsARefusal(t *testing.T) {
	for chain, layers := range finishChains {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", chain, stream), func(t *testing.T) {
				g := newGateway(t, layers, []reply{{body: openAIRefusal}, {body: openAIRefusal}}, nil)
				assert.Equal(t, openAIAnswer{refusal: "I can't help with that.", finish: "stop"}, g.askOpenAI(t, "primary", stream), "stream %v", stream)

				msg := g.askAnthropic(t, "primary", stream)
				require.Len(t, msg.Content, 1)
				assert.Equal(t, "I can't help with that.", msg.Content[0].Text)
				assert.Equal(t, anthropic.StopReasonRefusal, msg.StopReason, "stream %v", stream)
			})
		}
	}
}

// An Anthropic refusal (the streaming classifier stopped the answer; no
// refusal message comes with it) reaches an OpenAI client as OpenAI's
// filter cut: the text that arrived as content, finish reason
// content_filter; an Anthropic client gets it as it was.
func TestAnthropicRefusalReachesEachClient(t *testing.T) {
	for _, stream := range []bool{false, true} {
		g := newGateway(t, typicalChain, nil, []reply{{body: anthropicStopping("refusal")}, {body: anthropicStopping("refusal")}})
		assert.Equal(t, openAIAnswer{content: "Hello..", finish: "content_filter"}, g.askOpenAI(t, "backup", stream), "stream %v", stream)
		msg := g.askAnthropic(t, "backup", stream)
		assert.Equal(t, anthropic.StopReasonRefusal, msg.StopReason, "stream %v", stream)
	}
}

// Anthropic's refusal explanation (stop_details), which the provider sends
// on as text marked a refusal after the answer it cut, reaches a streaming
// Anthropic client as a text block of its own, not run on from the cut
// answer ("Here is how toThe request asks...").
func TestAnthropicRefusalExplanationIsItsOwnBlock(t *testing.T) {
	sse, err := os.ReadFile("../providers/anthropic/testdata/refusal.sse")
	require.NoError(t, err)
	g := newGateway(t, typicalChain, nil, []reply{{body: string(sse)}})
	msg := g.askAnthropic(t, "backup", true)
	require.Len(t, msg.Content, 2)
	assert.Equal(t, "Here is how to", msg.Content[0].Text)
	assert.Equal(t, "The request asks for help writing malware.", msg.Content[1].Text)
	assert.Equal(t, anthropic.StopReasonRefusal, msg.StopReason)
}

// An OpenAI client sends a refusal it got back in the transcript, as the
// SDK's ToParam writes it (assistant refusal): the gateway carries it as
// the assistant's text.
func TestOpenAIRefusalInTheTranscriptIsCarried(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: openAIRefusal}, {body: transcript(t, "openai", "text.sse")}}, nil)
	client := g.openai(t)
	first, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
	require.NoError(t, err)
	_, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello"), first.Choices[0].Message.ToParam(), openai.UserMessage("Why?")}})
	require.NoError(t, err)
	sent := sentMessages(t, g.oa.body(1))
	require.Len(t, sent, 3)
	assert.Equal(t, "assistant", sent[1].Role)
	assert.Equal(t, "I can't help with that.", sent[1].Content)
}

// sentMessage is a message of a Chat Completions request an upstream got.
type sentMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    any    `json:"content"`
}

// sentMessages decodes the messages of a Chat Completions request body.
func sentMessages(t *testing.T, body string) []sentMessage {
	t.Helper()
	var sent struct {
		Messages []sentMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &sent))
	return sent.Messages
}

// A paused turn (Anthropic's pause_turn) is not passed for a finished
// one: an Anthropic client gets pause_turn, an OpenAI client length (the
// answer is cut short, OpenAI's nearest word; stop would say it is whole).
func TestPausedTurnReachesEachClientUnfinished(t *testing.T) {
	for _, stream := range []bool{false, true} {
		g := newGateway(t, typicalChain, nil, []reply{{body: anthropicStopping("pause_turn")}, {body: anthropicStopping("pause_turn")}})
		msg := g.askAnthropic(t, "backup", stream)
		require.Len(t, msg.Content, 1)
		assert.Equal(t, "Hello..", msg.Content[0].Text)
		assert.Equal(t, anthropic.StopReasonPauseTurn, msg.StopReason, "stream %v", stream)
		assert.Equal(t, openAIAnswer{content: "Hello..", finish: "length"}, g.askOpenAI(t, "backup", stream), "stream %v", stream)
	}
}

// An upstream's finish reason the gateway has no word for is relayed to
// an OpenAI client, and the stop sequence an Anthropic model stopped at
// to an Anthropic client: one of 10 KiB was relayed whole (the upstream's
// stream is read up to its events' bound). Each is bounded as an
// upstream's error fields are (maxRelayedField), cut and marked; a short
// one is relayed as it is.
func TestUpstreamFinishWordsAreBounded(t *testing.T) {
	long := strings.Repeat("z", 10<<10)
	openAIFinishing := func(reason string) string {
		return `data: {"id":"chatcmpl-f1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello.."},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-f1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}

data: {"id":"chatcmpl-f1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}

data: [DONE]

`
	}
	anthropicStoppedAt := func(seq string) string {
		return strings.Replace(anthropicStopping("stop_sequence"), `"stop_sequence":null},"usage"`, `"stop_sequence":"`+seq+`"},"usage"`, 1)
	}
	for _, stream := range []bool{false, true} {
		g := newGateway(t, typicalChain, []reply{{body: openAIFinishing(long)}, {body: openAIFinishing("abort")}},
			[]reply{{body: anthropicStoppedAt(long)}, {body: anthropicStoppedAt(`\n\nHuman:`)}})
		got := g.askOpenAI(t, "primary", stream)
		assert.Equal(t, "Hello..", got.content)
		assert.LessOrEqual(t, len(got.finish), maxRelayedField, "stream %v", stream)
		assert.True(t, strings.HasPrefix(got.finish, "zzz"), got.finish)
		assert.Contains(t, got.finish, "(cut: the message ran 10240 bytes)")
		assert.Equal(t, "abort", g.askOpenAI(t, "primary", stream).finish, "stream %v", stream)

		msg := g.askAnthropic(t, "backup", stream)
		assert.Equal(t, anthropic.StopReasonStopSequence, msg.StopReason, "stream %v", stream)
		assert.LessOrEqual(t, len(msg.StopSequence), maxRelayedField, "stream %v", stream)
		assert.True(t, strings.HasPrefix(msg.StopSequence, "zzz"), msg.StopSequence)
		assert.Equal(t, "\n\nHuman:", g.askAnthropic(t, "backup", stream).StopSequence, "stream %v", stream)
	}
}

// TestClientStopSequenceRelayedWhole: the stop sequence an Anthropic model
// stopped at is one of the client's own stop_sequences, which a client
// compares with its list: one over maxRelayedField was cut and marked, and
// matched none of them. It is relayed unchanged when it is one of the
// request's; an upstream's other sequence is still cut.
func TestClientStopSequenceRelayedWhole(t *testing.T) {
	own := "\n\nEND OF ANSWER " + strings.Repeat("=", 300)
	other := strings.Repeat("y", 300)
	anthropicStoppedAt := func(seq string) string {
		return strings.Replace(anthropicStopping("stop_sequence"), `"stop_sequence":null},"usage"`, `"stop_sequence":`+strconv.Quote(seq)+`},"usage"`, 1)
	}
	for _, stream := range []bool{false, true} {
		g := newGateway(t, typicalChain, nil, []reply{{body: anthropicStoppedAt(own)}, {body: anthropicStoppedAt(other)}})
		msg := g.askAnthropic(t, "backup", stream, "STOP", own)
		assert.Equal(t, anthropic.StopReasonStopSequence, msg.StopReason, "stream %v", stream)
		assert.True(t, msg.StopSequence == own, "stream %v: the client's own sequence, whole: %q", stream, msg.StopSequence)
		msg = g.askAnthropic(t, "backup", stream, "STOP", own)
		assert.LessOrEqual(t, len(msg.StopSequence), maxRelayedField, "stream %v", stream)
		assert.Contains(t, msg.StopSequence, "(cut: the message ran 300 bytes)", "stream %v", stream)
	}
}
