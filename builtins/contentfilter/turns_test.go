package contentfilter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A provider sends consecutive messages of one role as one turn (Anthropic
// merges them), which the model reads run together: a keyword cut across
// two of them reaches it whole, and is found as one cut across the text
// parts of one message is. Messages of different roles, or of one role
// with another between them, are not read together. Anthropic's API sends
// a tool result as a tool_result block of a user message, beside the text
// of the user message next to it, so a tool message and the user messages
// and tool messages around it are one user turn too.
func TestChatKeywordAcrossConsecutiveMessages(t *testing.T) {
	call := runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "search", Arguments: []byte(`{}`)}, {ID: "c2", Name: "search", Arguments: []byte(`{}`)}}}
	tests := []struct {
		name    string
		config  string
		msgs    []runtime.Message
		blocked string
	}{
		{"two user messages", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "user", Content: "drop"}, {Role: "user", Content: " table users"}}, "messages 0 to 1 (one turn) input"},
		{"user messages run together inside a word", `{"keywords":["forbidden"]}`, []runtime.Message{
			{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yes"}, {Role: "user", Content: "forbi"},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "dden"}}}}, "messages 2 to 3 (one turn) input"},
		{"assistant messages joined by a line break", `{"patterns":["one\\nstep"]}`, []runtime.Message{
			{Role: "user", Content: "go"}, {Role: "assistant", Content: "step one"}, {Role: "assistant", Content: "step two"}}, "messages 1 to 2 (one turn) input"},
		{"system messages", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "system", Content: "drop"}, {Role: "system", Content: "table"}, {Role: "user", Content: "ok"}}, "messages 0 to 1 (one turn) input"},
		{"system messages apart, one system prompt", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "system", Content: "drop"}, {Role: "user", Content: "ok"}, {Role: "system", Content: " table"}}, "system messages 0 to 2 (one system prompt) input"},
		{"system messages apart left alone with system false", `{"keywords":["drop table"],"system":false}`, []runtime.Message{
			{Role: "system", Content: "drop"}, {Role: "user", Content: "ok"}, {Role: "system", Content: " table"}}, ""},
		{"system messages left alone with system false", `{"keywords":["drop table"],"system":false}`, []runtime.Message{
			{Role: "system", Content: "drop"}, {Role: "system", Content: "table"}, {Role: "user", Content: "ok"}}, ""},
		{"a word cut between two glued pieces", `{"keywords":["forbidden"]}`, []runtime.Message{
			{Role: "user", Content: "hi"}, {Role: "user", Content: "forbi"}, {Role: "user", Content: "dden"}}, "messages 0 to 2 (one turn) input"},
		{"a word cut twice, glued on both sides", `{"keywords":["forbidden"]}`, []runtime.Message{
			{Role: "user", Content: "hi"}, {Role: "user", Content: "for"}, {Role: "user", Content: "bid"},
			{Role: "user", Content: "den"}, {Role: "user", Content: "ok"}}, "messages 0 to 4 (one turn) input"},
		{"text parts glued on both sides", `{"keywords":["forbidden"]}`, []runtime.Message{
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "hi"}, {Type: runtime.PartText, Text: "forbi"},
				{Type: runtime.PartText, Text: "dden"}, {Type: runtime.PartText, Text: "ok"}}}}, "message 0 input"},
		{"a tool result and the user message after it", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "user", Content: "look it up"}, call, {Role: "tool", ToolCallID: "c1", Content: "drop"},
			{Role: "user", Content: " table users"}}, "messages 2 to 3 (one turn) input"},
		{"a user message and the tool result after it", `{"keywords":["drop table"]}`, []runtime.Message{
			call, {Role: "user", Content: "drop"}, {Role: "tool", ToolCallID: "c1", Content: " table users"}}, "messages 1 to 2 (one turn) input"},
		{"two tool results", `{"keywords":["drop table"]}`, []runtime.Message{
			call, {Role: "tool", ToolCallID: "c1", Content: "drop"}, {Role: "tool", ToolCallID: "c2", Content: "table"}}, "messages 1 to 2 (one turn) input"},
		{"a tool_result part and the text of its message", `{"keywords":["forbidden"]}`, []runtime.Message{
			call, {Role: "user", Content: "dden", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "forbi"}}}},
			"message 1 input"},
		{"a tool result and an assistant message", `{"keywords":["drop table"]}`, []runtime.Message{
			call, {Role: "tool", ToolCallID: "c1", Content: "drop"}, {Role: "assistant", Content: "table"}}, ""},
		{"a user and an assistant message", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "user", Content: "drop"}, {Role: "assistant", Content: "table"}}, ""},
		{"user messages apart", `{"keywords":["drop table"]}`, []runtime.Message{
			{Role: "user", Content: "drop"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "table"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Deltas: []string{"fine"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", tt.config))}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: tt.msgs})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, 1, model.Calls())
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "words", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Zero(t, model.Calls())
		})
	}
}

// The texts found clean are recorded for the run: a turn whose messages
// were each clean, and clean run together, is not read again; one that a
// message added to makes a new text, which is read.
func TestChatTurnRecordedForTheRun(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"fine"}}, rt.Response{Deltas: []string{"fine"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", `{"keywords":["drop table"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	msgs := []runtime.Message{{Role: "user", Content: "please"}, {Role: "user", Content: "drop"}}
	_, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err, "each message, and the two run together, are clean")
	_, err = pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: append(msgs, runtime.Message{Role: "user", Content: " table"})})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "the turn the third message joins was never found clean")
	assert.Contains(t, b.Message, "messages 0 to 2 (one turn)")
	assert.Equal(t, 1, model.Calls())
}
