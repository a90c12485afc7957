package pii_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// A thinking block sent back in the transcript is read as redact reads it: it is signed and
// cannot be masked, so with "redact" one holding personal data is left out of the call's
// copy (the call fails when the turn going on cannot do without it), and with "block" it
// blocks the call.
func TestThinkingBlocksSentBack(t *testing.T) {
	withCard := runtime.ContentPart{Type: runtime.PartThinking, Text: "the card is 4111 1111 1111 1111", Signature: "sig-1"}
	clean := runtime.ContentPart{Type: runtime.PartThinking, Text: "look it up first", Signature: "sig-2"}
	call := []runtime.ToolUse{{ID: "t1", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}
	transcript := func() []runtime.Message {
		return []runtime.Message{
			{Role: "user", Content: "find it"},
			{Role: "assistant", Parts: []runtime.ContentPart{withCard}, ToolCalls: call},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "t1", Text: "found"}}},
			{Role: "assistant", Parts: []runtime.ContentPart{clean}, Content: "found it"},
			{Role: "user", Content: "thanks"},
		}
	}
	enabled := &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}

	model := &recordingModel{}
	msgs := transcript()
	_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.Empty(t, model.seen[0][1].Parts, "the block holding a card is left out")
	assert.Equal(t, call, model.seen[0][1].ToolCalls)
	assert.Equal(t, msgs[3], model.seen[0][3], "a clean block goes on as it is")
	assert.Equal(t, transcript(), msgs, "the caller's messages are untouched")

	model = &recordingModel{}
	msgs = transcript()[:3]
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs, Thinking: enabled})
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Message, "messages[1].parts[0]")
	assert.NotContains(t, ce.Message, "4111")
	assert.Empty(t, model.seen)

	_, err = chatPipeline(t, `{}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript()})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "message 1 thinking")
	assert.Empty(t, model.seen)
}
