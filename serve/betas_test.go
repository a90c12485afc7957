package serve

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sonnetLongContext is Anthropic's context-1m tier of the backup model:
// above 200,000 input tokens twice the input and cache prices, 1.5 times
// the output price.
const sonnetLongContext = `models: backup: {usd_per_mtok_cached: 0.3, usd_per_mtok_cache_write: 3.75, usd_per_mtok_cache_write_1h: 6,
	long_context: {above_input_tokens: 200000, usd_per_mtok_in: 6, usd_per_mtok_out: 22.5,
		usd_per_mtok_cached: 0.6, usd_per_mtok_cache_write: 7.5, usd_per_mtok_cache_write_1h: 12}}`

// TestLongContextBetaUnderAMeter: the context-1m beta has the provider
// bill a request over 200,000 input tokens at a premium (twice the input
// price) that a meter prices only for a model that declares its
// long-context tier: a chain with a meter refuses it, before any model is
// called, while a model the request can reach (its own, a fallback's)
// declares none, or one from above the beta's 200,000 tokens, saying how
// to declare it; without a meter it is carried.
func TestLongContextBetaUnderAMeter(t *testing.T) {
	body := []byte(`{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}`)
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey, body,
		"anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14,context-1m-2025-08-07")
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "anthropic-beta: context-1m-2025-08-07")
	assert.Contains(t, resp, "model backup, which the request can reach, declares no long_context tier")
	assert.Contains(t, resp, "meter layer meter")
	assert.Contains(t, resp, "models: backup: long_context: {above_input_tokens: 200000")
	assert.Zero(t, g.an.requests(), "the request never reached the upstream")

	// backup declares its tier, but the fallback may serve the request
	// with another Claude model that does not.
	decls := weatherDecl + "\n" + sonnetLongContext + `
models: opus: {provider: "anthropic", model: "claude-opus-4-1", base_url: models.backup.base_url, api_key_env: models.backup.api_key_env,
	usd_per_mtok_in: 15, usd_per_mtok_out: 75}`
	g = newGatewayWith(t, decls, `{use: "meter", budget: usd: 100}, {use: "fallback", models: ["backup", "opus"]}`, nil,
		[]reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "context-1m-2025-08-07")
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "model opus")
	assert.Zero(t, g.an.requests())

	// A tier that starts above the beta's threshold leaves the requests
	// between the two priced below their bill.
	decls = weatherDecl + "\n" + strings.Replace(sonnetLongContext, "above_input_tokens: 200000", "above_input_tokens: 272000", 1)
	g = newGatewayWith(t, decls, `{use: "meter", budget: usd: 100}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "context-1m-2025-08-07")
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "model backup, which the request can reach, has its long_context tier only above 272000 input tokens")
	assert.Zero(t, g.an.requests())

	g = newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, resp = do(t, "POST", g.url+"/v1/messages", clientKey, body,
		"anthropic-version", "2023-06-01", "anthropic-beta", "context-1m-2025-08-07")
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, "context-1m-2025-08-07", g.an.header(0).Get("anthropic-beta"))
}

// longPrompt is an Anthropic stream whose prompt counted 211,000 input
// tokens, above the context-1m threshold: 1,000 fresh, 150,000 read from
// the cache, 60,000 written to it (20,000 of them to one-hour entries).
var longPrompt = strings.Replace(anthropicStopping("end_turn"), `"usage":{"input_tokens":10,"output_tokens":1}`,
	`"usage":{"input_tokens":1000,"cache_read_input_tokens":150000,"cache_creation_input_tokens":60000,"cache_creation":{"ephemeral_5m_input_tokens":40000,"ephemeral_1h_input_tokens":20000},"output_tokens":1}`, 1)

// TestLongContextBetaPricedAtTheTier: with the tier declared on the model
// the request reaches (the fallback's other model is an OpenAI one, which
// refuses any beta before it is billed), the SDK's context-1m beta is
// carried to the upstream under a meter, and the meter prices the answer,
// whose input is above 200,000 tokens counting its cache reads and
// writes, at the tier: a budget the model's own rates would leave room in
// refuses the next call.
func TestLongContextBetaPricedAtTheTier(t *testing.T) {
	// 1,000 input at 6, 150,000 read at 0.6, 40,000 written at 7.5, 20,000
	// to one-hour entries at 12, 3 output at 22.5: 0.6360675 USD (at the
	// model's own rates, 0.318045).
	chain := strings.Replace(typicalChain, `budget: usd: 100`, `budget: usd: 0.5, scope: "key"`, 1)
	g := newGatewayWith(t, weatherDecl+"\n"+sonnetLongContext, chain, nil, []reply{{body: longPrompt}, {body: longPrompt}})
	params := anthropic.BetaMessageNewParams{Model: "backup", MaxTokens: 64,
		Betas:    []anthropic.AnthropicBeta{anthropic.AnthropicBetaContext1m2025_08_07},
		Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Summarize the repository."))}}
	client := g.anthropic(t)
	msg, err := client.Beta.Messages.New(context.Background(), params)
	require.NoError(t, err)
	assert.EqualValues(t, 150000, msg.Usage.CacheReadInputTokens, msg.RawJSON())
	assert.Equal(t, "context-1m-2025-08-07", g.an.header(0).Get("anthropic-beta"))
	assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"} 0.63606`)

	_, err = client.Beta.Messages.New(context.Background(), params)
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusPaymentRequired, ae.StatusCode, ae.RawJSON())
	assert.Equal(t, 1, g.an.requests(), "the ledger holds the tier's price, above the budget")
}

// TestLongContextBetaSpelledOtherwise: a beta's name is read as the
// provider reads it, whatever its case, so the context-1m beta written in
// capitals, in a second header among other features, is refused under a
// meter as the lowercase one is, before any model is called.
func TestLongContextBetaSpelledOtherwise(t *testing.T) {
	body := []byte(`{"model": "backup", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}`)
	for _, beta := range []string{"Context-1M-2025-08-07", " CONTEXT-1M-2025-08-07 ", "interleaved-thinking-2025-05-14, Context-1m-2025-08-07"} {
		g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
		req, err := http.NewRequest("POST", g.url+"/v1/messages", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Add("anthropic-beta", "claude-code-20250219")
		req.Header.Add("anthropic-beta", beta)
		code, _, resp := roundTrip(t, req)
		require.Equal(t, http.StatusBadRequest, code, resp)
		assert.Contains(t, resp, "declares no long_context tier")
		assert.Zero(t, g.an.requests(), "%q never reached the upstream", beta)
	}
}
