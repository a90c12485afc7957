package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// Anthropic's API refuses an empty text block ("text content blocks must
// be non-empty"), and a tool that returns nothing is common: a result
// without text was sent as [{"type":"text","text":""}], and so was an
// empty user message or an assistant's blank text beside its calls, and
// the next turn of the loop failed upstream. A result without text is
// sent without content (the API takes it so), a blank text beside other
// blocks is left out, and a user message with nothing in it, or a
// request of no message besides the system prompt, is refused before any
// upstream, naming the message.
func TestEmptyTextIsNotSentAsAnEmptyBlock(t *testing.T) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	call := []runtime.ToolUse{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{}`)}, {ID: "t2", Name: "f", Arguments: json.RawMessage(`{}`)}}
	req := runtime.ChatRequest{Tools: []runtime.ToolDef{{Name: "f"}}, Messages: []runtime.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", Content: "  ", ToolCalls: call},
		{Role: "tool", ToolCallID: "t1"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "t2", IsError: true}, {Type: runtime.PartText}}},
	}}
	b, err := c.body(&req)
	require.NoError(t, err)
	msgs := gjson.GetBytes(b, "messages")
	require.Len(t, msgs.Array(), 3, "%s", b)
	assert.JSONEq(t, `[{"type":"tool_use","id":"t1","name":"f","input":{}},{"type":"tool_use","id":"t2","name":"f","input":{}}]`,
		msgs.Get("1.content").Raw, "the blank text beside the calls is left out")
	assert.JSONEq(t, `[{"type":"tool_result","tool_use_id":"t1","is_error":false},{"type":"tool_result","tool_use_id":"t2","is_error":true}]`,
		msgs.Get("2.content").Raw, "results without text have no content")
	assert.NotContains(t, string(b), `"text":""`)

	for name, msgs := range map[string][]runtime.Message{
		"empty user message": {{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yes"}, {Role: "user"}},
		"system alone":       {{Role: "system", Content: "Be brief."}},
	} {
		_, err := c.body(&runtime.ChatRequest{Messages: msgs})
		require.Error(t, err, name)
		if name == "empty user message" {
			assert.Contains(t, err.Error(), "messages[2]", name)
		}
		assert.Contains(t, err.Error(), "Anthropic's API", name)
	}
}

// An empty text part left out took its prompt-cache breakpoint with it,
// and the prefix the client asked cached was not: the breakpoint moves to
// the block before it, which ends the same prefix (an empty block adds
// nothing to it), unless that block has one of its own.
func TestEmptyTextKeepsItsBreakpoint(t *testing.T) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	cc := &runtime.CacheControl{TTL: "1h"}
	call := []runtime.ToolUse{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{}`), PartsAfter: 1}}
	req := runtime.ChatRequest{Tools: []runtime.ToolDef{{Name: "f"}}, Messages: []runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "long context"}, {Type: runtime.PartText, CacheControl: cc}}},
		{Role: "assistant", ToolCalls: call, Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: " ", CacheControl: cc}}},
		{Role: "tool", ToolCallID: "t1", Content: "done"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "a", CacheControl: &runtime.CacheControl{}}, {Type: runtime.PartText, CacheControl: cc}}},
	}}
	b, err := c.body(&req)
	require.NoError(t, err)
	msgs := gjson.GetBytes(b, "messages")
	require.Len(t, msgs.Array(), 3, "%s", b)
	assert.JSONEq(t, `[{"type":"text","text":"long context","cache_control":{"type":"ephemeral","ttl":"1h"}}]`, msgs.Get("0.content").Raw)
	assert.Equal(t, "1h", msgs.Get("1.content.0.cache_control.ttl").String(), "%s", b)
	assert.JSONEq(t, `[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}],"is_error":false},{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`,
		msgs.Get("2.content").Raw, "a block with a breakpoint of its own keeps it")
}
