package anthropic

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// The Messages API takes tool_use ids of letters, digits, _ and - alone,
// and an OpenAI-format history may hold others (functions.get_weather:0,
// as some OpenAI-compatible servers write them): sent unchanged, a
// fallback to a Claude model in the middle of a run failed with a 400.
// Such an id is sent as a safe one, the same for a call and its result,
// distinct ids staying distinct; a safe id is sent as it is.
func TestToolCallIDsOutsideThePatternAreMapped(t *testing.T) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	ids := []string{"functions.get_weather:0", "functions.get_weather:1", "functions_get_weather_0", "call_ok-1", "東京", ""}
	var calls []runtime.ToolUse
	for _, id := range ids {
		calls = append(calls, runtime.ToolUse{ID: id, Name: "get_weather", Arguments: json.RawMessage(`{}`)})
	}
	msgs := []runtime.Message{{Role: "user", Content: "Weather?"}, {Role: "assistant", ToolCalls: calls}}
	for i, id := range ids {
		if i%2 == 0 {
			msgs = append(msgs, runtime.Message{Role: "tool", ToolCallID: id, Content: "18C"})
		} else {
			msgs = append(msgs, runtime.Message{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: id, Text: "18C"}}})
		}
	}
	// The empty id answers no call as a tool message; as a part it does.
	msgs[len(msgs)-1] = runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "", Text: "18C"}}}
	req := runtime.ChatRequest{Messages: msgs, Tools: []runtime.ToolDef{{Name: "get_weather"}}}
	b, err := c.body(&req)
	require.NoError(t, err)

	uses := gjson.GetBytes(b, "messages.1.content.#.id").Array()
	results := gjson.GetBytes(b, "messages.2.content.#.tool_use_id").Array()
	require.Len(t, uses, len(ids), string(b))
	require.Len(t, results, len(ids), string(b))
	safe := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	seen := map[string]bool{}
	for i, id := range ids {
		sent := uses[i].String()
		assert.Regexp(t, safe, sent, "id %q", id)
		assert.Equal(t, sent, results[i].String(), "the result of %q answers its call", id)
		assert.False(t, seen[sent], "id %q sent as %q, which another id was sent as", id, sent)
		seen[sent] = true
		if safe.MatchString(id) {
			assert.Equal(t, id, sent, "a safe id is sent as it is")
		}
	}

	// The mapping is the same from one request to the next.
	again, err := c.body(&req)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(again))
}
