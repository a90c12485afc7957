package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRequestKeysReadAsTheAPIReadsThem: encoding/json reads the last of a
// key given twice and matches a key to a field whatever its case, while
// the API (and any reader of the body before the gateway: a log, a guard)
// reads keys exactly and may read the first. A body on which they could
// disagree is refused, naming the key, before any layer or upstream.
func TestRequestKeysReadAsTheAPIReadsThem(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	const msgs = `"messages": [{"role": "user", "content": "hi"}]`
	for _, tt := range []struct{ name, route, body, want string }{
		{"openai model twice", "/v1/chat/completions", `{"model": "primary", "model": "backup", ` + msgs + `}`, "model: given twice"},
		{"openai MODEL", "/v1/chat/completions", `{"model": "primary", "MODEL": "", ` + msgs + `}`, "MODEL: given twice"},
		{"openai Max_Tokens", "/v1/chat/completions", `{"model": "primary", "Max_Tokens": 0, ` + msgs + `}`, `Max_Tokens: the field is spelt "max_tokens"`},
		{"openai stream folded", "/v1/chat/completions", `{"model": "primary", "stream": true, "Stream": false, ` + msgs + `}`, "Stream: given twice"},
		{"openai escaped twice", "/v1/chat/completions", `{"model": "primary", "max_tokens": 64, "max_token\u0073": 0, ` + msgs + `}`, "max_tokens: given twice"},
		{"openai message content twice", "/v1/chat/completions", `{"model": "primary", "messages": [{"role": "user", "content": "hi", "Content": ""}]}`, "messages[0].Content: given twice"},
		{"openai kelvin", "/v1/chat/completions", `{"model": "primary", "max_to\u212Aens": 0, ` + msgs + `}`, `the field is spelt "max_tokens"`},
		{"anthropic max_tokens twice", "/v1/messages", `{"model": "backup", "max_tokens": 64, "MAX_TOKENS": 0, ` + msgs + `}`, "MAX_TOKENS: given twice"},
		{"anthropic TOOLS", "/v1/messages", `{"model": "backup", "max_tokens": 64, "TOOLS": [], ` + msgs + `}`, `TOOLS: the field is spelt "tools"`},
		{"anthropic system twice", "/v1/messages", `{"model": "backup", "max_tokens": 64, "system": "be kind", "system": "", ` + msgs + `}`, "system: given twice"},
		{"anthropic count_tokens", "/v1/messages/count_tokens", `{"model": "backup", "Model": "backup", ` + msgs + `}`, "Model: given twice"},
		{"responses model twice", "/v1/responses", `{"model": "primary", "Model": "backup", "input": "hi"}`, "Model: given twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, resp := do(t, "POST", g.url+tt.route, clientKey, []byte(tt.body), "anthropic-version", "2023-06-01")
			requireInvalidRequest(t, code, resp, tt.want)
		})
	}
	assert.Zero(t, g.oa.requests()+g.an.requests())
}
