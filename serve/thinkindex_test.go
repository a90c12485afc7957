package serve

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// A model client whose stream numbers a thinking block a billion blocks
// past those it sent is a broken upstream. The bound on such an index was
// checked by the consumers of the stream, whose refusal read to the layers
// as the caller stopping: a fallback did not move on, a breaker counted a
// success, and a streaming client got the block. It is checked where the
// model's deltas enter the chat chain, as the upstream's failure: the
// fallback serves the call from the next model, the breaker counts it, and
// without a fallback the client gets a 502 naming the index.
func TestAbsurdThinkingIndexIsAnUpstreamFailure(t *testing.T) {
	var calls atomic.Int32
	broken := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		calls.Add(1)
		if !yield(runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: 1e9, Text: "far"}}) {
			return nil
		}
		yield(runtime.Delta{Text: "never read", FinishReason: "stop"})
		return nil
	})
	withBroken := func(o *Options) {
		o.Models = func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": broken}, nil
		}
	}
	text := transcript(t, "anthropic", "text.sse")
	g := newGateway(t, `{use: "fallback", models: ["primary", "backup"]},
	{use: "retry", max_attempts: 1, breaker: {failures: 1, cooldown: "1m"}}`,
		nil, []reply{{body: text}, {body: text}, {body: text}}, withBroken)
	params := anthropic.MessageNewParams{Model: "primary", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

	m, err := g.anthropic(t).Messages.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "backup", string(m.Model), "the backup served the call")
	assert.Equal(t, 1, g.an.requests())

	s := g.anthropic(t).Messages.NewStreaming(context.Background(), params)
	var blocks []string
	for s.Next() {
		if e, ok := s.Current().AsAny().(anthropic.ContentBlockStartEvent); ok {
			blocks = append(blocks, e.ContentBlock.Type)
		}
	}
	require.NoError(t, s.Err())
	assert.Equal(t, []string{"text"}, blocks, "no block of the broken stream reached the client")
	assert.Equal(t, int32(1), calls.Load(), "the breaker opened on the first failure: the primary is not called again")
	assert.Equal(t, 2, g.an.requests())

	// Without a fallback: a 502 naming the index, the upstream's failure.
	g = newGateway(t, `{use: "tracing"}`, nil, nil, withBroken)
	an := g.anthropicErrorOf(t, "primary")
	assert.Equal(t, 502, an.status)
	assert.Equal(t, "transient", an.kind)
	assert.True(t, strings.Contains(an.text, "thinking fragment index 1000000000"), an.text)
}

// An Anthropic upstream numbers its content blocks as it likes: the
// provider client renumbers thinking blocks in their order, so an absurd
// block index reaches the client as the response's first block.
func TestAnthropicUpstreamsAbsurdBlockIndexIsRenumbered(t *testing.T) {
	events := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":4000000000000,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":4000000000000,"delta":{"type":"thinking_delta","thinking":"hmm"}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":4000000000000,"delta":{"type":"signature_delta","signature":"sig"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":4000000000000}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: events}})
	m, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 2048,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.NoError(t, err)
	require.NotEmpty(t, m.Content)
	assert.Equal(t, "thinking", m.Content[0].Type)
	assert.Equal(t, "hmm", m.Content[0].Thinking)
	assert.Equal(t, "sig", m.Content[0].Signature)
}
