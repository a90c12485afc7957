package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The field check and the typed decoding must read an object's variant
// alike: a type given twice (encoding/json reads the last, a parser
// upstream may read the first) or spelt with an escape is refused or read
// as the decoding reads it, so that a context edit the gateway refuses
// (compaction) is never relayed under a type it serves, and a field of a
// variant is never let through unchecked.
func TestVariantTypeReadAsDecoded(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	const thinkingOn = `"thinking": {"type": "adaptive"}, `
	for _, tt := range []struct{ name, body, want string }{
		{"edit type twice", thinkingOn + `"context_management": {"edits": [{"type": "compact_20260112", "pause_after_compaction": true, "type": "clear_tool_uses_20250919"}]}`,
			"context_management.edits[0].type: given twice"},
		{"escaped edit type", thinkingOn + `"context_management": {"edits": [{"typ\u0065": "clear_tool_uses_20250919", "pause_after_compaction": true}]}`,
			"context_management.edits[0].pause_after_compaction: not carried"},
		{"block type twice", `"messages": [{"role": "user", "content": [{"type": "document", "type": "text", "text": "hi", "citations": [{"type": "char_location"}]}]}]`,
			"messages[0].content[0].type: given twice"},
		{"escaped block type", `"messages": [{"role": "user", "content": [{"typ\u0065": "text", "text": "hi", "citations": [{"type": "char_location"}]}]}]`,
			"messages[0].content[0].citations: not carried"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model": "backup", "max_tokens": 64, ` + tt.body
			if !strings.Contains(tt.body, `"messages"`) {
				body += `, "messages": [{"role": "user", "content": "hi"}]`
			}
			for _, route := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
				code, _, resp := do(t, "POST", g.url+route, clientKey, []byte(body+"}"), "anthropic-version", "2023-06-01")
				requireInvalidRequest(t, code, resp, tt.want)
			}
		})
	}
	// The Responses route's items are checked alike.
	code, _, resp := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": [{"type": "message", "role": "user", "content": [{"type": "input_file", "type": "input_text", "text": "hi", "file_id": "file-1"}]}]}`))
	requireInvalidRequest(t, code, resp, "input[0].content[0].type: given twice")
	assert.Zero(t, g.oa.requests()+g.an.requests())
}
