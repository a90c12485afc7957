package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// interleaved is an assistant turn of Anthropic's interleaved thinking:
// thinking, call a, thinking, text, call b.
func interleaved() runtime.Message {
	return runtime.Message{Role: "assistant",
		Parts: []runtime.ContentPart{{Type: runtime.PartThinking, Text: "t0", Signature: "s0"},
			{Type: runtime.PartThinking, Text: "t1", Signature: "s1"}, {Type: runtime.PartText, Text: "x"}},
		ToolCalls: []runtime.ToolUse{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`), PartsAfter: 2}, {ID: "b", Name: "f", Arguments: json.RawMessage(`{}`)}}}
}

// order lists the message's blocks in order: parts by type, calls by id.
func order(m *runtime.Message) []string {
	var out []string
	for j, k := range m.Blocks() {
		if k >= 0 {
			out = append(out, m.ToolCalls[k].ID)
		} else {
			out = append(out, m.Parts[j].Type)
		}
	}
	return out
}

func TestMessageBlocksInOrder(t *testing.T) {
	m := interleaved()
	assert.Equal(t, []string{"thinking", "a", "thinking", "text", "b"}, order(&m))
	assert.True(t, m.Interleaved())

	// The zero value: the calls after every part, as before the field.
	m.ToolCalls[0].PartsAfter = 0
	assert.Equal(t, []string{"thinking", "thinking", "text", "a", "b"}, order(&m))
	assert.False(t, m.Interleaved())

	// A call first of all, and one placed beyond the parts: before them.
	m.ToolCalls[0].PartsAfter, m.ToolCalls[1].PartsAfter = 3, 9
	assert.Equal(t, []string{"a", "b", "thinking", "thinking", "text"}, order(&m))

	// Calls keep their order: one placed before an earlier one waits for it.
	m.ToolCalls[0].PartsAfter, m.ToolCalls[1].PartsAfter = 1, 3
	assert.Equal(t, []string{"thinking", "thinking", "a", "b", "text"}, order(&m))

	var none runtime.Message
	assert.Empty(t, order(&none))
}

// Removing parts keeps each call in its place among the parts left, and
// leaves the message removed from as it was.
func TestDeletePartsKeepsCallsInPlace(t *testing.T) {
	m := interleaved()
	first := func(p runtime.ContentPart) bool { return p.Signature == "s0" }
	got := m.DeleteParts(first)
	assert.Equal(t, []string{"a", "thinking", "text", "b"}, order(&got))
	assert.Equal(t, []string{"thinking", "a", "thinking", "text", "b"}, order(&m), "the original is unchanged")

	second := func(p runtime.ContentPart) bool { return p.Signature == "s1" }
	got = m.DeleteParts(second)
	assert.Equal(t, []string{"thinking", "a", "text", "b"}, order(&got))
	assert.Equal(t, 1, got.ToolCalls[0].PartsAfter)
	assert.Equal(t, 2, m.ToolCalls[0].PartsAfter, "the original's calls are unchanged")

	got = m.DeleteParts(func(runtime.ContentPart) bool { return false })
	assert.Equal(t, m, got)
	got = m.DeleteParts(func(runtime.ContentPart) bool { return true })
	assert.Empty(t, got.Parts)
	assert.Equal(t, []string{"a", "b"}, order(&got))
}

// The place rides in a transcript's JSON (a checkpoint) only when a call
// has one: a message without interleaving encodes as before.
func TestCallPlaceInJSON(t *testing.T) {
	m := interleaved()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"id":"a","name":"f","arguments":{},"parts_after":2}`)
	assert.Contains(t, string(b), `"id":"b","name":"f","arguments":{}}`)
	var back runtime.Message
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, m, back)
}
