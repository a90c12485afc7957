package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUpstreamKeyBodyIsScrubbed: an upstream's message that echoed the
// gateway's key without its prefix (sk-) reached the client and the log
// as it was: only the whole key was scrubbed. The key's tails after a
// separator, long enough to be the key's alone, are scrubbed too.
func TestUpstreamKeyBodyIsScrubbed(t *testing.T) {
	body := strings.TrimPrefix(openAIKey, "sk-")
	tail := openAIKey[strings.LastIndex(openAIKey, "-")+1:]
	for _, echoed := range []string{body, tail} {
		msg := `{"error": {"message": "key=` + echoed + ` is not valid", "type": "invalid_request_error", "code": null, "param": null}}`
		g := newGateway(t, `{use: "tracing"}`, []reply{{status: 400, body: msg}}, nil)
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
			[]byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}]}`))
		assert.Equal(t, http.StatusBadRequest, code, resp)
		assert.Contains(t, resp, "is not valid", "the upstream's message is relayed")
		assert.NotContains(t, resp, echoed)
		assert.NotContains(t, g.logs.String(), echoed)
	}
}
