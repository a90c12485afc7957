package serve

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestGuardReadsTextPartsAsTheModelDoes: a guard read the text parts of a
// message joined by line breaks, while a model reads them run together (a
// Claude model separate text blocks, OpenAI's API content parts), so
// "wire" and " transfer" passed deny "content.contains('wire transfer')"
// and reached the model as "wire transfer", and "wire" and "transfer"
// were refused by a deny on "wire\ntransfer", which no model read.
// Adjacent text parts are one text, run together, on all three routes:
// the guard, the detectors and either provider's model read the same.
func TestGuardReadsTextPartsAsTheModelDoes(t *testing.T) {
	const deny = `{use: "guard", name: "no_wire", deny: "messages.exists(m, m.content.contains('wire transfer'))", message: "no"},
	{use: "guard", name: "no_wire_lines", deny: "messages.exists(m, m.content.contains('wire\\ntransfer'))", message: "no"}`
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	bodies := func(a, b string) map[string]string {
		parts := func(typ string) string {
			return `[{"type": "` + typ + `", "text": ` + q(a) + `}, {"type": "` + typ + `", "text": ` + q(b) + `}]`
		}
		return map[string]string{
			"/v1/chat/completions": `{"model": "backup", "messages": [{"role": "user", "content": ` + parts("text") + `}]}`,
			"/v1/messages":         `{"model": "backup", "max_tokens": 16, "messages": [{"role": "user", "content": ` + parts("text") + `}]}`,
			"/v1/responses":        `{"model": "backup", "input": [{"role": "user", "content": ` + parts("input_text") + `}]}`,
		}
	}
	t.Run("evaded", func(t *testing.T) {
		g := newGateway(t, deny, nil, nil)
		for path, body := range bodies("please send a wire", " transfer of 5000") {
			code, _, resp := do(t, "POST", g.url+path, clientKey, []byte(body), "anthropic-version", "2023-06-01")
			assert.Equal(t, http.StatusForbidden, code, "%s: %s", path, resp)
		}
		assert.Zero(t, g.an.requests())
	})
	t.Run("falsely triggered", func(t *testing.T) {
		text := transcript(t, "anthropic", "text.sse")
		g := newGateway(t, deny, nil, []reply{{body: text}, {body: text}, {body: text}})
		for path, body := range bodies("wire", "transfer") {
			code, _, resp := do(t, "POST", g.url+path, clientKey, []byte(body), "anthropic-version", "2023-06-01")
			require.Equal(t, http.StatusOK, code, "%s: %s", path, resp)
		}
		for i := range 3 {
			content := sentTo(t, g.an, i)["messages"].([]any)[0].(map[string]any)["content"]
			assert.Contains(t, []any{"wiretransfer", []any{map[string]any{"type": "text", "text": "wiretransfer"}}}, content, "the model is sent what the guard read")
		}
	})
}

// A run of text parts ends at another part, at a tool call placed among
// the parts and after a prompt-cache breakpoint; the calls keep their
// places; a tool message's parts and the system messages' stay as sent.
func TestRunTextTogetherKeepsPlacesAndBreakpoints(t *testing.T) {
	cc := &runtime.CacheControl{Type: "ephemeral"}
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	msgs := []runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{text("a"), text("b"), {Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
			{Type: runtime.PartText, Text: "c", CacheControl: cc}, text("d"), text("e")}},
		{Role: "assistant", Parts: []runtime.ContentPart{{Type: runtime.PartThinking, Text: "t", Signature: "s"}, text("x"), text("y"), text("z")},
			ToolCalls: []runtime.ToolUse{{ID: "1", Name: "f", PartsAfter: 1}, {ID: "2", Name: "g"}}},
		{Role: "user", Parts: []runtime.ContentPart{text("p"), {Type: runtime.PartText, Text: "q", CacheControl: cc}}},
		{Role: "tool", ToolCallID: "1", Parts: []runtime.ContentPart{text("sunny"), text("22")}},
		{Role: "system", Parts: []runtime.ContentPart{text("be"), text("brief")}},
	}
	runTextTogether(msgs)
	assert.Equal(t, []runtime.ContentPart{text("ab"), {Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
		{Type: runtime.PartText, Text: "c", CacheControl: cc}, text("de")}, msgs[0].Parts)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartThinking, Text: "t", Signature: "s"}, text("xy"), text("z")}, msgs[1].Parts)
	assert.Equal(t, []runtime.ToolUse{{ID: "1", Name: "f", PartsAfter: 1}, {ID: "2", Name: "g"}}, msgs[1].ToolCalls, "f between xy and z, g after z")
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartText, Text: "pq", CacheControl: cc}}, msgs[2].Parts, "the breakpoint at the end of the run")
	assert.Equal(t, []runtime.ContentPart{text("sunny"), text("22")}, msgs[3].Parts)
	assert.Equal(t, []runtime.ContentPart{text("be"), text("brief")}, msgs[4].Parts)
}
