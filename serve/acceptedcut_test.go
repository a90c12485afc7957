package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream the upstream accepted (200) and cut before its first event was
// billed the prompt, and so was a streaming request answered with a whole
// chat.completion: neither was charged, and the cut one was retried,
// uncharged again. Each attempt is now charged (the input estimate, or the
// usage the JSON answer reports); the JSON answer, which the upstream
// would send again, is not retried.
func TestAcceptedThenCutIsCharged(t *testing.T) {
	chain := `{use: "meter", budget: usd: 100}, {use: "retry", max_attempts: 2, initial_delay: "1ms", max_delay: "5ms"}`
	req := []byte(`{"model":"primary","stream":true,"messages":[{"role":"user","content":"hi"}]}`)

	g := newGateway(t, chain, []reply{{body: ""}, {body: ""}}, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, req)
	require.Equal(t, 502, code, body)
	assert.Equal(t, 2, g.oa.Requests(), "a cut before any event is retried")
	assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`, "each attempt was billed its prompt")

	whole := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":50}}`
	g = newGateway(t, chain, []reply{{header: map[string]string{"Content-Type": "application/json"}, body: whole}}, nil)
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, req)
	require.Equal(t, 502, code, body)
	assert.Contains(t, body, `not a stream of server-sent events`)
	assert.Equal(t, 1, g.oa.Requests(), "the same answer would come again")
	// 100 in at $0.4/Mtok, 50 out at $1.6/Mtok.
	assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"} 0.00012`+"\n")
}
