package anthropic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// The Messages API refuses a request whose history holds tool_use or
// tool_result blocks and that defines no tools ("Requests which include
// tool_use or tool_result blocks must define tools"), and the client sent
// such a request as it came: a client asking for an answer without tools
// after some were called (Codex compacting a conversation) got a 400 for
// the gateway's wire format. The tools the history calls are declared, by
// name, with tool_choice none, so that the model calls none of them; a
// request that offers tools is sent as it was.
func TestHistoryToolsAreDeclaredWhenNoneAreOffered(t *testing.T) {
	b := caseBody(t, "results last")
	tools := gjson.GetBytes(b, "tools").Array()
	require.Len(t, tools, 1, string(b))
	assert.Equal(t, "get_weather", tools[0].Get("name").String())
	assert.Equal(t, "object", tools[0].Get("input_schema.type").String())
	assert.JSONEq(t, `{"type":"none"}`, gjson.GetBytes(b, "tool_choice").Raw)

	b = caseBody(t, "transcript")
	assert.Len(t, gjson.GetBytes(b, "tools").Array(), 1)
	assert.False(t, gjson.GetBytes(b, "tool_choice").Exists(), "offered tools are sent as they are")

	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	calls := []runtime.ToolUse{{ID: "a", Name: "read", Arguments: []byte(`{}`)}, {ID: "b", Name: "read", Arguments: []byte(`{}`)}, {ID: "c", Name: "write", Arguments: []byte(`{}`)}}
	req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "go"}, {Role: "assistant", ToolCalls: calls},
		{Role: "tool", ToolCallID: "a", Content: "1"}, {Role: "tool", ToolCallID: "b", Content: "2"}, {Role: "tool", ToolCallID: "c", Content: "3"},
		{Role: "user", Content: "Summarize."}}, ToolChoice: "auto"}
	b, err = c.body(&req)
	require.NoError(t, err)
	var names []string
	for _, t := range gjson.GetBytes(b, "tools.#.name").Array() {
		names = append(names, t.String())
	}
	assert.Equal(t, []string{"read", "write"}, names, "each tool once, in the order first called")
	assert.JSONEq(t, `{"type":"none"}`, gjson.GetBytes(b, "tool_choice").Raw, "no tool is offered: none may be called")
}
