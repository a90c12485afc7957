package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGuardReadsTextPartsAsTheModelDoes: a guard read the text parts of a
// message joined by line breaks, while a model reads them run together (a
// Claude model separate text blocks, a prompt-cache breakpoint between
// them or not, and the system prompt's blocks; OpenAI's API content
// parts), so "wire" and " transfer" passed deny
// "content.contains('wire transfer')" and reached the model as "wire
// transfer", and "wire" and "transfer" were refused by a deny on
// "wire\ntransfer", which no model read. On all three routes, in a user
// message, across a breakpoint and in the system prompt, the guard reads
// what either provider's model reads, and the blocks reach a Claude model
// as the client sent them.
func TestGuardReadsTextPartsAsTheModelDoes(t *testing.T) {
	const deny = `{use: "guard", name: "no_wire", deny: "messages.exists(m, m.content.contains('wire transfer'))", message: "no"},
	{use: "guard", name: "no_wire_lines", deny: "messages.exists(m, m.content.contains('wire\\ntransfer'))", message: "no"}`
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	bodies := func(model, a, b string) map[string]string {
		parts := func(typ, cc string) string {
			return `[{"type": "` + typ + `", "text": ` + q(a) + cc + `}, {"type": "` + typ + `", "text": ` + q(b) + `}]`
		}
		return map[string]string{
			"/v1/chat/completions user":   `{"model": "` + model + `", "messages": [{"role": "user", "content": ` + parts("text", "") + `}]}`,
			"/v1/chat/completions system": `{"model": "` + model + `", "messages": [{"role": "system", "content": ` + parts("text", "") + `}, {"role": "user", "content": "hi"}]}`,
			"/v1/messages user":           `{"model": "` + model + `", "max_tokens": 16, "messages": [{"role": "user", "content": ` + parts("text", "") + `}]}`,
			"/v1/messages breakpoint":     `{"model": "` + model + `", "max_tokens": 16, "messages": [{"role": "user", "content": ` + parts("text", `, "cache_control": {"type": "ephemeral"}`) + `}]}`,
			"/v1/messages system":         `{"model": "` + model + `", "max_tokens": 16, "system": ` + parts("text", `, "cache_control": {"type": "ephemeral"}`) + `, "messages": [{"role": "user", "content": "hi"}]}`,
			"/v1/messages system plain":   `{"model": "` + model + `", "max_tokens": 16, "system": ` + parts("text", "") + `, "messages": [{"role": "user", "content": "hi"}]}`,
			"/v1/responses user":          `{"model": "` + model + `", "input": [{"role": "user", "content": ` + parts("input_text", "") + `}]}`,
			"/v1/responses system":        `{"model": "` + model + `", "input": [{"role": "system", "content": ` + parts("input_text", "") + `}, {"role": "user", "content": "hi"}]}`,
		}
	}
	t.Run("evaded", func(t *testing.T) {
		g := newGateway(t, deny, nil, nil)
		for _, model := range []string{"primary", "backup"} {
			for what, body := range bodies(model, "please send a wire", " transfer of 5000") {
				code, resp := postRoute(t, g, what, body)
				assert.Equal(t, http.StatusForbidden, code, "%s to %s: %s", what, model, resp)
			}
		}
		assert.Zero(t, g.an.requests())
		assert.Zero(t, g.oa.requests())
	})
	t.Run("falsely triggered", func(t *testing.T) {
		n := len(bodies("", "", ""))
		an, oa := make([]reply, n), make([]reply, n)
		for i := range n {
			an[i] = reply{body: transcript(t, "anthropic", "text.sse")}
			oa[i] = reply{body: transcript(t, "openai", "text.sse")}
		}
		g := newGateway(t, deny, oa, an)
		for _, model := range []string{"primary", "backup"} {
			for what, body := range bodies(model, "wire", "transfer") {
				code, resp := postRoute(t, g, what, body)
				require.Equal(t, http.StatusOK, code, "%s to %s: %s", what, model, resp)
			}
		}
		for i := range n {
			// A Claude model is sent the blocks as the client sent them,
			// which it reads run together.
			sent := sentTo(t, g.an, i)
			blocks := sent["system"]
			if blocks == nil {
				blocks = sent["messages"].([]any)[0].(map[string]any)["content"]
			}
			var texts []any
			for _, b := range blocks.([]any) {
				texts = append(texts, b.(map[string]any)["text"])
			}
			assert.Equal(t, []any{"wire", "transfer"}, texts, "sent %s", g.an.body(i))
			// An OpenAI model is sent one text, run together, as the
			// guard read it.
			content := sentTo(t, g.oa, i)["messages"].([]any)[0].(map[string]any)["content"]
			assert.Equal(t, "wiretransfer", content, "sent %s", g.oa.body(i))
		}
	})
}

// TestGuardReadsATurnWhole: a guard read each message apart, while the
// model reads consecutive user messages, and a tool result with the user's
// text after it, as one turn (as pii, security and content_filter read
// them), so "wire" in one and " transfer" in the next passed deny
// "content.contains('wire transfer')". On all three routes the guard reads
// the turn whole, and two turns are not read as one.
func TestGuardReadsATurnWhole(t *testing.T) {
	const deny = `{use: "guard", name: "no_wire", deny: "messages.exists(m, m.content.contains('wire transfer'))", message: "no"}`
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	bodies := func(a, b string) map[string]string {
		return map[string]string{
			"/v1/chat/completions users": `{"model": "primary", "messages": [{"role": "user", "content": ` + q(a) + `}, {"role": "user", "content": ` + q(b) + `}]}`,
			"/v1/chat/completions tool": `{"model": "primary", "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
				{"role": "tool", "tool_call_id": "c1", "content": ` + q(a) + `}, {"role": "user", "content": ` + q(b) + `}]}`,
			"/v1/messages users": `{"model": "primary", "max_tokens": 16, "messages": [{"role": "user", "content": ` + q(a) + `}, {"role": "user", "content": ` + q(b) + `}]}`,
			"/v1/messages tool": `{"model": "primary", "max_tokens": 16, "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": ` + q(a) + `}, {"type": "text", "text": ` + q(b) + `}]}]}`,
			// The text before the result in the blocks: both providers send
			// the result first, and the model reads it so.
			"/v1/messages text before tool": `{"model": "primary", "max_tokens": 16, "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}]},
				{"role": "user", "content": [{"type": "text", "text": ` + q(b) + `}, {"type": "tool_result", "tool_use_id": "c1", "content": ` + q(a) + `}]}]}`,
			"/v1/responses users": `{"model": "primary", "input": [{"role": "user", "content": ` + q(a) + `}, {"role": "user", "content": ` + q(b) + `}]}`,
			"/v1/responses tool": `{"model": "primary", "input": [{"role": "user", "content": "look"},
				{"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
				{"type": "function_call_output", "call_id": "c1", "output": ` + q(a) + `}, {"role": "user", "content": ` + q(b) + `}]}`,
		}
	}
	g := newGateway(t, deny, nil, nil)
	for what, body := range bodies("please send a wire", " transfer of 5000") {
		code, resp := postRoute(t, g, what, body)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", what, resp)
	}
	assert.Zero(t, g.oa.requests())
	n := len(bodies("", ""))
	oa := make([]reply, n)
	for i := range n {
		oa[i] = reply{body: transcript(t, "openai", "text.sse")}
	}
	g = newGateway(t, deny, oa, nil)
	for what, body := range bodies("wire", "transfer") {
		code, resp := postRoute(t, g, what, body)
		assert.Equal(t, http.StatusOK, code, "%s: %s", what, resp)
	}
}

// postRoute posts body to the route what names (its path, then a word
// saying what the body holds), and returns the status and the response.
func postRoute(t *testing.T, g *gateway, what, body string) (int, string) {
	t.Helper()
	path, _, _ := strings.Cut(what, " ")
	code, _, resp := do(t, "POST", g.url+path, clientKey, []byte(body), "anthropic-version", "2023-06-01")
	return code, resp
}
