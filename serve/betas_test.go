package serve

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLongContextBetaUnderAMeter: the context-1m beta has the provider
// bill a request over 200,000 input tokens at a premium (twice the input
// price) that a meter, pricing at the model's declared rates, does not
// count: a chain with a meter refuses it before any model is called, so a
// budget is not overspent; without a meter it is carried.
func TestLongContextBetaUnderAMeter(t *testing.T) {
	body := []byte(`{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}`)
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, body,
		"anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14,context-1m-2025-08-07")
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "anthropic-beta: context-1m-2025-08-07")
	assert.Contains(t, resp, "meter")
	assert.Zero(t, g.an.requests(), "the request never reached the upstream")

	g = newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, body,
		"anthropic-version", "2023-06-01", "anthropic-beta", "context-1m-2025-08-07")
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, "context-1m-2025-08-07", g.an.header(0).Get("anthropic-beta"))
}
