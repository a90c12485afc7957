package compaction_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func call(id, name string) runtime.ToolUse {
	return runtime.ToolUse{ID: id, Name: name, Arguments: json.RawMessage(`{"q":"x"}`)}
}

// assertPaired asserts that every tool result in msgs answers a call an
// earlier assistant message of msgs requested, and every requested call
// has its result.
func assertPaired(t *testing.T, msgs []runtime.Message) {
	t.Helper()
	requested := map[string]bool{}
	answered := map[string]bool{}
	for i, m := range msgs {
		for _, tc := range m.ToolCalls {
			requested[tc.ID] = true
		}
		if m.Role == "tool" {
			assert.True(t, requested[m.ToolCallID], "tool message %d answers %q, which no kept message requested", i, m.ToolCallID)
			answered[m.ToolCallID] = true
		}
		for _, p := range m.Parts {
			if p.Type == runtime.PartToolResult {
				assert.True(t, requested[p.ToolCallID], "message %d answers %q, which no kept message requested", i, p.ToolCallID)
				answered[p.ToolCallID] = true
			}
		}
	}
	for id := range requested {
		assert.True(t, answered[id], "call %q lost its result", id)
	}
}

func TestToolCallsStayWithTheirResultsByID(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "system", Content: "you are helpful"},
		{Role: "user", Content: long(0)},
		// OpenAI shape: parallel calls, results as tool messages.
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search"), call("call_b", "fetch")}},
		{Role: "tool", ToolCallID: "call_a", Content: long(1)},
		{Role: "tool", ToolCallID: "call_b", Content: long(2)},
		{Role: "assistant", Content: long(3)},
		{Role: "user", Content: long(4)},
		// Anthropic shape: results as tool_result parts of a user message.
		{Role: "assistant", Content: "checking", ToolCalls: []runtime.ToolUse{call("toolu_1", "search")}},
		{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartToolResult, ToolCallID: "toolu_1", Text: long(5)},
			{Type: runtime.PartText, Text: "and also this"},
		}},
		{Role: "tool", ToolCallID: "call_never_requested", Content: "orphan"},
		{Role: "assistant", Content: "done"},
	}
	orig := append([]runtime.Message(nil), msgs...)
	for _, keep := range []int{1, 2, 3, 5, 8} {
		for _, budget := range []int{60, 150, 300, 1000} {
			model := &recorder{text: "ok"}
			pl := build(t, `{"max_tokens":`+itoa(budget)+`,"keep_recent":`+itoa(keep)+`}`, map[string]runtime.ModelClient{"primary": model})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
			require.NoError(t, err)
			got := model.seen[0]
			assertPaired(t, got)
			assert.Equal(t, orig, msgs, "the caller's transcript is untouched")
			for _, m := range got {
				assert.NotEqual(t, "call_never_requested", m.ToolCallID, "the orphan is dropped")
			}
		}
	}

	// keep_recent 2 protects the user message carrying toolu_1's result:
	// its assistant message stays, parts and calls as they were, after the
	// user message that asked for it.
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":100,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": model})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, []runtime.Message{msgs[0], msgs[6], msgs[7], msgs[8], msgs[10]}, model.seen[0])
}

func TestSummaryDescribesToolCallsAndParts(t *testing.T) {
	summarizer := &recorder{text: "they searched"}
	model := &recorder{text: "ok"}
	pl := build(t, `{"strategy":"summarize","model":"backup","max_tokens":80,"keep_recent":1}`,
		map[string]runtime.ModelClient{"primary": model, "backup": summarizer})
	msgs := []runtime.Message{
		{Role: "user", Content: long(0)},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search")}},
		{Role: "tool", ToolCallID: "call_a", Content: "result text"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: long(1)}}},
	}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, summarizer.seen, 1)
	input := summarizer.seen[0][1].Content
	assert.Contains(t, input, `[tool call search {"q":"x"}]`)
	assert.Contains(t, input, "tool: result text")
	got := model.seen[0]
	assert.Equal(t, "system", got[0].Role)
	assert.Equal(t, msgs[3], got[1], "the kept message keeps its parts")
}

func itoa(n int) string { return strconv.Itoa(n) }
