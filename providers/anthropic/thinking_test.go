package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// Thinking blocks become thinking fragments, indexed by the order of the
// thinking blocks, before the text; the builder assembles them whole.
func TestThinkingBlocksBecomeFragments(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "redacted_thinking.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	var got []runtime.ThinkingDelta
	var b runtime.ThinkingBuilder
	for i := range ds {
		if ds[i].Thinking != nil {
			got = append(got, *ds[i].Thinking)
		}
		b.Add(&ds[i])
	}
	data := "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmXmqLfcW1E+oA=="
	assert.Equal(t, []runtime.ThinkingDelta{
		{Index: 0, Redacted: true, Signature: data},
		{Index: 1},
		{Index: 1, Text: "Answer plainly."},
		{Index: 1, Signature: "ErUBCkYIBxgCIkB0m9zQ/r8+Kp3=="},
	}, got)
	assert.Equal(t, []runtime.ContentPart{
		{Type: runtime.PartRedactedThinking, Signature: data},
		{Type: runtime.PartThinking, Text: "Answer plainly.", Signature: "ErUBCkYIBxgCIkB0m9zQ/r8+Kp3=="},
	}, b.Blocks())
	assert.Equal(t, "Hello.", ssetest.Text(ds))
	assert.Equal(t, runtime.Usage{InputTokens: 96}, ds[0].Usage, "message_start's input usage rides on the first delta, a thinking one")
	assert.Equal(t, runtime.Usage{InputTokens: 96, OutputTokens: 41}, sum(ds))
}

// A JSON response format without a schema (OpenAI's json_object) cannot be
// asked of an Anthropic model, whose structured outputs follow a schema:
// the call fails and reaches no upstream, rather than being answered in
// free text.
func TestSchemalessJSONFormatRefused(t *testing.T) {
	for _, rf := range []*runtime.ResponseFormat{{Type: runtime.FormatJSONObject}, {Type: runtime.FormatJSONSchema}} {
		s := ssetest.New(t)
		req := hi()
		req.ResponseFormat = rf
		err := client(t, s).Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Equal(t, http.StatusBadRequest, ce.Status)
		assert.Contains(t, ce.Error(), "response_format "+rf.Type+" without a schema")
		assert.ErrorIs(t, err, runtime.ErrProviderRefused, "another provider may serve it: a fallback falls over")
		assert.Zero(t, s.Requests())
	}
}

// reasoning_effort, verbosity and custom tools are OpenAI's: an Anthropic
// model fails the call, which reaches no upstream.
func TestReasoningEffortRefused(t *testing.T) {
	for field, set := range map[string]func(*runtime.ChatRequest){
		"reasoning_effort": func(r *runtime.ChatRequest) { r.ReasoningEffort = "high" },
		"verbosity":        func(r *runtime.ChatRequest) { r.Verbosity = "low" },
		// A custom tool, and an earlier call of one: the Messages API has
		// none, and a tool of one string would not hold its grammar.
		"custom (free-form) tool apply_patch": func(r *runtime.ChatRequest) {
			r.Tools = []runtime.ToolDef{{Name: "apply_patch", Custom: &runtime.CustomTool{Format: runtime.CustomGrammar, Syntax: "lark", Definition: "start: x"}}}
		},
		"call call_1 of the custom (free-form) tool apply_patch": func(r *runtime.ChatRequest) {
			r.Messages = append(r.Messages, runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "apply_patch", Arguments: runtime.CustomArgs("x"), Custom: true}}})
		},
	} {
		s := ssetest.New(t)
		req := hi()
		set(&req)
		err := client(t, s).Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce, field)
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Equal(t, http.StatusBadRequest, ce.Status)
		assert.Contains(t, ce.Error(), field)
		assert.ErrorIs(t, err, runtime.ErrProviderRefused, "another provider may serve it: a fallback falls over")
		assert.Zero(t, s.Requests())
	}
}

// Interleaved thinking (thinking between tool_use blocks) comes out in the
// order of the blocks, the thinking indexed by the thinking blocks, the
// fragments of a call by the tool_use blocks.
func TestInterleavedThinkingKeepsTheBlockOrder(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "interleaved_thinking.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	var order []string
	var b runtime.ThinkingBuilder
	var calls runtime.ToolCallBuilder
	for i := range ds {
		d := &ds[i]
		b.Add(d)
		calls.Add(d)
		switch {
		case d.Thinking != nil:
			order = append(order, fmt.Sprintf("thinking %d", d.Thinking.Index))
		case d.Text != "":
			order = append(order, "text")
		case len(d.ToolCalls) > 0 && d.ToolCalls[0].ID != "":
			order = append(order, fmt.Sprintf("tool %d", d.ToolCalls[0].Index))
		}
	}
	assert.Equal(t, []string{"thinking 0", "thinking 0", "thinking 0", "thinking 0", "tool 0",
		"thinking 1", "thinking 1", "thinking 1", "text", "tool 1"}, order)
	blocks := b.Blocks()
	require.Len(t, blocks, 2)
	assert.Equal(t, "The user wants the weather in Paris and in Lyon. Weather first.", blocks[0].Text)
	assert.Equal(t, "EuYBCkQYAiJAQ7nM2kP4sV9hT1cX0bZ8rW3yL6fJ5dA2gE9uK7oN1pR4tS8vY0wB3xC6zD9eF2hG5jI8lM1nO4qP7rU0sA==", blocks[0].Signature)
	assert.Equal(t, "EpMCCkYIBRgCKkDx4Lr9QmT2vN8cH5kP1sW7yJ3bG6fA0dE9uZ2oX4iR8tV1nM5qC7wL3hK6jS0gY9pB2eF4aU8zD1mI5rO==", blocks[1].Signature)
	got := calls.ToolCalls()
	require.Len(t, got, 2)
	assert.JSONEq(t, `{"location": "Paris"}`, string(got[0].Arguments))
	assert.JSONEq(t, `{"location": "Lyon"}`, string(got[1].Arguments))
	assert.Equal(t, runtime.FinishToolCalls, ds[len(ds)-1].FinishReason)
}

// A part the Messages API takes in a user message alone (an image that is
// no result's, a PDF) fails the call, naming the message and the part,
// rather than be left out of what the model reads; no request is sent.
func TestUnsentPartsFailTheCall(t *testing.T) {
	pdf := runtime.ContentPart{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0x"}
	img := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}
	result := runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "toolu_1", Text: "done"}
	call := runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_1", Name: "t", Arguments: json.RawMessage(`{}`)}}}
	for want, m := range map[string]runtime.Message{
		"messages[2]: parts[1]: an image in a tool message that is part of no tool result": {Role: "tool", Parts: []runtime.ContentPart{result, img}},
		"messages[2]: parts[0]: an image in a tool message that is part of no tool result": {Role: "tool", ToolCallID: "toolu_1", Parts: []runtime.ContentPart{img}},
		"messages[2]: parts[1]: a PDF document in a message of role tool":                  {Role: "tool", Parts: []runtime.ContentPart{result, pdf}},
		"messages[2]: parts[0]: a PDF document in a message of role assistant":             {Role: "assistant", Parts: []runtime.ContentPart{pdf, {Type: runtime.PartText, Text: "a"}}},
		"messages[2]: parts[0]: a PDF document in a message of role system":                {Role: "system", Parts: []runtime.ContentPart{pdf}},
	} {
		s := ssetest.New(t)
		req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "go"}, call, m}}
		err := client(t, s).Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce, want)
		assert.Equal(t, runtime.KindPermanent, ce.Kind, want)
		assert.ErrorContains(t, err, want)
		assert.Zero(t, s.Requests(), want)
	}
	// The image of a result, and a user's PDF, are sent.
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	err := client(t, s).Stream(context.Background(), &runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{pdf}}, call,
		{Role: "tool", Parts: []runtime.ContentPart{result, {Type: runtime.PartImage, ToolCallID: "toolu_1", ImageURL: "https://example.com/a.png"}}}}}, func(runtime.Delta) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, 1, s.Requests())
}
