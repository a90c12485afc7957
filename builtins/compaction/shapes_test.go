package compaction_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	"github.com/agentc-dev/agentc/runtime"
)

// A "developer" message is the system prompt of OpenAI's newer models, and
// both providers send it as one: compaction keeps it as it keeps a system
// message, never drops it as the oldest turn.
func TestDeveloperMessageIsKeptAsTheSystemPrompt(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":200,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": model})
	msgs := []runtime.Message{
		{Role: "developer", Content: "never move money without a confirmation"},
		{Role: "user", Content: long(1)},
		{Role: "assistant", Content: long(2)},
		{Role: "user", Content: long(3)},
		{Role: "assistant", Content: long(4)},
		{Role: "user", Content: long(5)},
	}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	require.Less(t, len(got), len(msgs), "the transcript was compacted")
	assert.Equal(t, msgs[0], got[0], "the developer prompt is kept")
}

// A tool message may carry its result as a tool_result part alone, without
// a ToolCallID of its own (both providers send the part's id): it answers
// the call the part names and is no orphan. Dropping it would leave the
// call unanswered, which both providers refuse.
func TestToolMessageAnsweringByPartIsNoOrphan(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":100000,"keep_recent":2}`, map[string]runtime.ModelClient{"primary": model})
	msgs := []runtime.Message{
		{Role: "system", Content: "you are helpful"},
		{Role: "user", Content: "look it up"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search"), call("call_b", "fetch")}},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_a", Text: "found"}}},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_b", Text: "fetched"}}},
		{Role: "user", Content: "thanks"},
	}
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, msgs, model.seen[0], "within budget and without orphans: passed on as it is")

	// Over the budget, the call and its results go or stay together.
	model.seen = nil
	pl = build(t, `{"max_tokens":64,"keep_recent":1}`, map[string]runtime.ModelClient{"primary": model})
	msgs = append(msgs, runtime.Message{Role: "assistant", Content: long(1)}, runtime.Message{Role: "user", Content: "and now?"})
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	assertPaired(t, got)
	for _, m := range got {
		if m.Role == "tool" {
			t.Fatalf("a tool result was kept without its call or the other way round: %+v", got)
		}
	}

	// Kept with the call when the call is recent.
	model.seen = nil
	pl = build(t, `{"max_tokens":64,"keep_recent":3}`, map[string]runtime.ModelClient{"primary": model})
	msgs = []runtime.Message{
		{Role: "user", Content: long(0)},
		{Role: "assistant", Content: long(1)},
		{Role: "user", Content: "look it up"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{call("call_a", "search")}},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_a", Text: "found"}}},
	}
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got = model.seen[0]
	assert.Equal(t, msgs[2:], got)
}

// A transcript whose protected messages alone are over the budget (a system
// prompt and one huge request) is sent as it is, never emptied: the model's
// own limit decides. Nothing was compacted, so nothing is recorded, and a
// host continuing from a compacted transcript still over the budget is told
// of no change.
func TestOverTheBudgetAloneIsSentAsItIs(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":64,"keep_recent":1}`, map[string]runtime.ModelClient{"primary": model})
	msgs := []runtime.Message{
		{Role: "system", Content: "you are helpful"},
		{Role: "user", Content: strings.Repeat("a long request ", 200)},
	}
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, msgs, model.seen[0], "nothing may be dropped: sent as it is")
	_, ok := compaction.CompactedOf(resp, "compaction")
	assert.False(t, ok, "no change, no annotation")

	msgs = append(msgs, runtime.Message{Role: "assistant", Content: "an answer"}, runtime.Message{Role: "user", Content: strings.Repeat("more ", 100)})
	resp, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got, ok := compaction.CompactedOf(resp, "compaction")
	require.True(t, ok)
	assert.Equal(t, msgs[:1], got.Messages[:1])
	assert.Equal(t, "user", got.Messages[1].Role)
	resp, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: got.Messages})
	require.NoError(t, err)
	_, ok = compaction.CompactedOf(resp, "compaction")
	assert.False(t, ok, "compacting the compacted transcript changes nothing")
	assert.Equal(t, got.Messages, model.seen[2])
}

// A transcript of tool results that answer no call in it holds nothing the
// layer may send (orphans are dropped: both providers refuse them): the call
// is refused, as a request the gateway cannot serve, rather than sent with no
// message at all.
func TestATranscriptOfOrphansIsRefusedNotEmptied(t *testing.T) {
	model := &recorder{text: "ok"}
	pl := build(t, `{"max_tokens":300,"keep_recent":3}`, map[string]runtime.ModelClient{"primary": model})
	for _, msgs := range [][]runtime.Message{
		{{Role: "tool", ToolCallID: "a", Content: "R1"}, {Role: "tool", ToolCallID: "b", Content: "R2"}},
		{{Role: "system", Content: "be brief"}, {Role: "tool", ToolCallID: "a", Content: "R1"}},
	} {
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, http.StatusBadRequest, ce.Status)
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Empty(t, ce.Layer, "a refusal of the request itself, as a provider's 400")
		assert.True(t, strings.HasPrefix(ce.Message, "compaction: "), "named by the layer: %s", ce.Message)
		assert.Contains(t, ce.Message, "answer no tool call")
		assert.Empty(t, model.seen, "nothing was sent")
	}
}
