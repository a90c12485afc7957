package anthropic_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// sentBody streams req to a loopback upstream and returns the body it got.
func sentBody(t *testing.T, req runtime.ChatRequest) gjson.Result {
	t.Helper()
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	_, err := ssetest.Collect(t, client(t, s), req)
	require.NoError(t, err)
	require.Len(t, s.Bodies(), 1)
	return gjson.ParseBytes(s.Bodies()[0])
}

// An empty text part is left out (the API refuses an empty text block),
// and its prompt-cache breakpoint went with it when it was a system part
// or the first block of a message: the prefix the client asked cached was
// not. The breakpoint ends the prefix up to the block before the empty
// one, in the API's order (tools, system, messages): that block takes it,
// be it the system block before, the last block of the message before, or
// the last tool.
func TestEmptyTextFirstInItsPlaceKeepsItsBreakpoint(t *testing.T) {
	cc := &runtime.CacheControl{TTL: "1h"}
	empty := runtime.ContentPart{Type: runtime.PartText, CacheControl: cc}
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	tools := []runtime.ToolDef{{Name: "f"}, {Name: "g"}}
	call := []runtime.ToolUse{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}
	const bp = `{"type":"ephemeral","ttl":"1h"}`

	t.Run("system part after a system block", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Messages: []runtime.Message{
			{Role: "system", Parts: []runtime.ContentPart{text("rules"), empty}},
			{Role: "user", Content: "hi"},
		}})
		assert.JSONEq(t, `[{"type":"text","text":"rules","cache_control":`+bp+`}]`, body.Get("system").Raw)
	})
	t.Run("system part after the system message's content", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Messages: []runtime.Message{
			{Role: "system", Content: "rules", Parts: []runtime.ContentPart{empty}},
			{Role: "user", Content: "hi"},
		}})
		assert.JSONEq(t, `[{"type":"text","text":"rules","cache_control":`+bp+`}]`, body.Get("system").Raw)
	})
	t.Run("first system part goes to the last tool", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Tools: tools, Messages: []runtime.Message{
			{Role: "system", Parts: []runtime.ContentPart{empty, text("rules")}},
			{Role: "user", Content: "hi"},
		}})
		assert.JSONEq(t, `[{"type":"text","text":"rules"}]`, body.Get("system").Raw)
		assert.False(t, body.Get("tools.0.cache_control").Exists())
		assert.JSONEq(t, bp, body.Get("tools.1.cache_control").Raw, "%s", body.Raw)
	})
	t.Run("first block of the first message goes to the last system block", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Tools: tools, Messages: []runtime.Message{
			{Role: "system", Content: "rules"},
			{Role: "user", Parts: []runtime.ContentPart{empty, text("hi")}},
		}})
		assert.JSONEq(t, `[{"type":"text","text":"rules","cache_control":`+bp+`}]`, body.Get("system").Raw)
		assert.JSONEq(t, `[{"type":"text","text":"hi"}]`, body.Get("messages.0.content").Raw)
		assert.False(t, body.Get("tools.1.cache_control").Exists())
	})
	t.Run("first block of a message goes to the message before", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Tools: tools, Messages: []runtime.Message{
			{Role: "user", Content: "go"},
			{Role: "assistant", ToolCalls: call},
			{Role: "tool", ToolCallID: "t1", Content: "done"},
			{Role: "assistant", Parts: []runtime.ContentPart{empty, text("it is done")}},
			{Role: "user", Parts: []runtime.ContentPart{empty, text("thanks")}},
		}})
		msgs := body.Get("messages")
		require.Len(t, msgs.Array(), 5, "%s", body.Raw)
		assert.JSONEq(t, `[{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]`, msgs.Get("1.content").Raw)
		assert.JSONEq(t, `[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}],"is_error":false,"cache_control":`+bp+`}]`, msgs.Get("2.content").Raw)
		assert.JSONEq(t, `[{"type":"text","text":"it is done","cache_control":`+bp+`}]`, msgs.Get("3.content").Raw)
		assert.JSONEq(t, `[{"type":"text","text":"thanks"}]`, msgs.Get("4.content").Raw)
	})
	t.Run("nothing before it: an empty prefix, nothing to cache", func(t *testing.T) {
		body := sentBody(t, runtime.ChatRequest{Messages: []runtime.Message{
			{Role: "user", Parts: []runtime.ContentPart{empty, text("hi")}},
		}})
		assert.JSONEq(t, `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`, body.Get("messages").Raw)
		assert.NotContains(t, body.Raw, "cache_control")
	})
	t.Run("a thinking block takes none", func(t *testing.T) {
		// The API refuses a breakpoint on a thinking block: the block
		// before it takes the breakpoint, ending the longest prefix one
		// can end there.
		body := sentBody(t, runtime.ChatRequest{Tools: tools, Messages: []runtime.Message{
			{Role: "user", Content: "go"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "t1", Name: "f", Arguments: json.RawMessage(`{}`)}}, Parts: []runtime.ContentPart{
				{Type: runtime.PartThinking, Text: "hmm", Signature: "sig"}, empty}},
			{Role: "tool", ToolCallID: "t1", Content: "done"},
		}})
		msgs := body.Get("messages")
		assert.JSONEq(t, `[{"type":"text","text":"go","cache_control":`+bp+`}]`, msgs.Get("0.content").Raw, "%s", body.Raw)
		assert.False(t, msgs.Get("1.content.0.cache_control").Exists(), "%s", body.Raw)
	})
	t.Run("a block with a breakpoint of its own keeps it", func(t *testing.T) {
		own := &runtime.CacheControl{}
		body := sentBody(t, runtime.ChatRequest{Messages: []runtime.Message{
			{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "rules", CacheControl: own}}},
			{Role: "user", Parts: []runtime.ContentPart{empty, text("hi")}},
		}})
		assert.JSONEq(t, `[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}]`, body.Get("system").Raw)
	})
}
