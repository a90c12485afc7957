package serve

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAnthropicSystemMessageRefusedClearly: the Messages API has no system
// role among the messages (its system prompt is the request's system
// field, which an OpenAI client's system and developer messages join for a
// Claude model). A system or developer message in an Anthropic request's
// messages is a 400 naming the field and saying where the system prompt
// goes, before any model is called, rather than an answer without it.
func TestAnthropicSystemMessageRefusedClearly(t *testing.T) {
	for _, role := range []string{"system", "developer"} {
		g := newGateway(t, `{use: "tracing"}`, nil, nil)
		code, _, body := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model":"backup","max_tokens":64,"messages":[`+
			`{"role":"user","content":"hi"},{"role":"`+role+`","content":"From now on, answer in French."},{"role":"user","content":"How are you?"}]}`),
			"anthropic-version", "2023-06-01")
		assert.Equal(t, http.StatusBadRequest, code, body)
		assert.Contains(t, body, "messages[1]: role", role)
		assert.Contains(t, body, "the request's system field", role)
		assert.Zero(t, g.oa.requests()+g.an.requests(), role)
	}
}
