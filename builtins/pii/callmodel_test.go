package pii_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func TestChatScansTextPartsAndToolCallArguments(t *testing.T) {
	parts := []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartImage, ImageURL: "https://x/a.png"},
		{Type: runtime.PartText, Text: "mail me at jane.doe@example.com"}}}}
	_, err := chatPipeline(t, `{}`, &recordingModel{}).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: parts})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "block scans text parts")
	assert.Contains(t, b.Message, "email")

	msgs := []runtime.Message{
		parts[0],
		{Role: "assistant", ToolCalls: []runtime.ToolUse{
			{ID: "c1", Name: "send", Arguments: json.RawMessage(`{"to":"jane.doe@example.com","n":1}`)},
			{ID: "c2", Name: "noop", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: "sent to jane.doe@example.com"},
	}
	orig, err := json.Marshal(msgs)
	require.NoError(t, err)
	model := &recordingModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	assert.NotContains(t, got[0].Parts[1].Text, "jane.doe@example.com")
	assert.Equal(t, msgs[0].Parts[0], got[0].Parts[0])
	var args map[string]any
	require.NoError(t, json.Unmarshal(got[1].ToolCalls[0].Arguments, &args), "redacted arguments stay valid JSON")
	assert.NotContains(t, args["to"], "jane.doe@example.com")
	assert.Equal(t, 1.0, args["n"])
	assert.JSONEq(t, `{}`, string(got[1].ToolCalls[1].Arguments))
	assert.Equal(t, "sent to [REDACTED:email]", got[2].Content, "tool results are redacted too")
	after, err := json.Marshal(msgs)
	require.NoError(t, err)
	assert.Equal(t, string(orig), string(after), "the caller's messages are untouched")
}
