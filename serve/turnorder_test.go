package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCardCutAcrossAResultAndTheUsersText: a card cut across a tool result
// and the user's text ("card on file 4111 1111" and "1111 1111, thanks"),
// which either provider sends result first, is refused by pii's "block" and
// reaches neither model whole through its "redact", on /v1/chat/completions
// (a tool message and the user's after it) and /v1/messages (a tool_result
// block with the text after it, or before it in the blocks), to either
// model.
func TestCardCutAcrossAResultAndTheUsersText(t *testing.T) {
	const result, text = "card on file 4111 1111", "1111 1111, thanks"
	bodies := func(model string) map[string]string {
		return map[string]string{
			"/v1/chat/completions tool": `{"model": "` + model + `", "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
				{"role": "tool", "tool_call_id": "c1", "content": ` + quoted(result) + `}, {"role": "user", "content": ` + quoted(text) + `}]}`,
			"/v1/messages result first": `{"model": "` + model + `", "max_tokens": 16, "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}]},
				{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": ` + quoted(result) + `}, {"type": "text", "text": ` + quoted(text) + `}]}]}`,
			"/v1/messages text first": `{"model": "` + model + `", "max_tokens": 16, "messages": [{"role": "user", "content": "look"},
				{"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {}}]},
				{"role": "user", "content": [{"type": "text", "text": ` + quoted(text) + `}, {"type": "tool_result", "tool_use_id": "c1", "content": ` + quoted(result) + `}]}]}`,
		}
	}
	models := []string{"primary", "backup"}
	t.Run("block", func(t *testing.T) {
		g := newGateway(t, `{use: "pii", action: "block"},`, nil, nil)
		for _, model := range models {
			for what, body := range bodies(model) {
				code, resp := postRoute(t, g, what, body)
				assert.Equal(t, http.StatusForbidden, code, "%s to %s: %s", what, model, resp)
			}
		}
		assert.Zero(t, g.oa.requests())
		assert.Zero(t, g.an.requests())
	})
	t.Run("redact", func(t *testing.T) {
		n := len(bodies(""))
		oa, an := make([]reply, n), make([]reply, n)
		for i := range n {
			oa[i] = reply{body: transcript(t, "openai", "text.sse")}
			an[i] = reply{body: transcript(t, "anthropic", "text.sse")}
		}
		g := newGateway(t, `{use: "pii", action: "redact"},`, oa, an)
		for _, model := range models {
			for what, body := range bodies(model) {
				code, resp := postRoute(t, g, what, body)
				require.Equal(t, http.StatusOK, code, "%s to %s: %s", what, model, resp)
			}
		}
		for _, up := range []*upstream{g.oa, g.an} {
			require.Equal(t, n, up.requests())
			for i := range n {
				sent := strings.ReplaceAll(up.body(i), " ", "")
				assert.NotContains(t, sent, "41111111", "sent %s", up.body(i))
				assert.Contains(t, up.body(i), "[REDACTED:card]", "sent %s", up.body(i))
				assert.Contains(t, up.body(i), ", thanks", "sent %s", up.body(i))
			}
		}
	})
}
