package serve

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ownCallRoute is one of the chat routes, with the body of a conversation
// for it and the header its request id comes back in.
type ownCallRoute struct {
	path, header string
	body         func(msgs []map[string]string, stream bool) []byte
}

var ownCallRoutes = []ownCallRoute{
	{"/v1/chat/completions", "X-Request-Id", func(msgs []map[string]string, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "primary", "stream": stream, "messages": msgs})
		return b
	}},
	{"/v1/messages", "Request-Id", func(msgs []map[string]string, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "primary", "stream": stream, "max_tokens": 64, "messages": msgs})
		return b
	}},
	{"/v1/responses", "X-Request-Id", func(msgs []map[string]string, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "primary", "stream": stream, "input": msgs})
		return b
	}},
}

var modelField = regexp.MustCompile(`"model":\s*"([^"]*)"`)

// assertServedByPrimary asserts that every model a response names is
// primary, the model that wrote the answer.
func assertServedByPrimary(t *testing.T, body string) {
	t.Helper()
	names := modelField.FindAllStringSubmatch(body, -1)
	require.NotEmpty(t, names, body)
	for _, m := range names {
		assert.Equal(t, "primary", m[1], "%s", body)
	}
}

// ownCallsCost is what the meter charges for n calls that billed
// Anthropic's text.sse usage (472 input tokens, 15 output), at backup's
// prices (3 and 15 USD per million).
func ownCallsCost(n int) float64 {
	return float64(n) * meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15}, runtime.Usage{InputTokens: 472, OutputTokens: 15})
}

// meterSpend returns the USD the chat chain's meter (scope global) charged.
func meterSpend(t *testing.T, g *gateway) float64 {
	t.Helper()
	for _, l := range g.srv.cur.Load().pl.Layers(plan.StageChat) {
		if r, ok := l.Middleware.(runtime.LedgerReader); ok {
			return r.Ledger("").USD
		}
	}
	t.Fatal("no meter in the chat chain")
	return 0
}

// spendMetric returns the sum of the spend metric's samples of tenant acme.
func spendMetric(t *testing.T, g *gateway) float64 {
	metrics := g.metrics(t)
	return sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"}`) +
		sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`)
}

// A judge's verdict call ran on the request's own context: the model it
// went to and its upstream's request id were noted last, so every route
// returned the judge's request id, and the streams named the judge's model
// (backup) as the one that answered. The response names the model that
// wrote the answer, and its request id. The spend metric left the verdict
// calls out, which the meter charges: it now counts them.
func TestAJudgesCallIsNotTheServedModel(t *testing.T) {
	answer := reply{body: transcript(t, "openai", "text.sse"), header: map[string]string{"x-request-id": "req_answer"}}
	verdict := reply{body: strings.Replace(transcript(t, "anthropic", "text.sse"), `"Hello"`, `"allow"`, 1),
		header: map[string]string{"request-id": "req_verdict"}}
	var oa, an []reply
	for range 2 * len(ownCallRoutes) {
		oa, an = append(oa, answer), append(an, verdict)
	}
	g := newGateway(t, `{use: "judge", model: "backup", prompt: "Answer allow or block."}, {use: "meter", scope: "global", budget: usd: 100}`, oa, an)
	for _, r := range ownCallRoutes {
		for _, stream := range []bool{false, true} {
			code, h, body := do(t, "POST", g.url+r.path, clientKey, r.body([]map[string]string{{"role": "user", "content": "Hello"}}, stream))
			require.Equal(t, http.StatusOK, code, "%s stream %v: %s", r.path, stream, body)
			assert.Equal(t, "req_answer", h.Get(r.header), "%s stream %v", r.path, stream)
			assertServedByPrimary(t, body)
		}
	}
	require.Equal(t, 6, g.an.requests(), "each answer was judged")
	metrics := g.metrics(t)
	assert.InDelta(t, ownCallsCost(6), sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"}`), 1e-12,
		"the meter charges each verdict call at backup's prices")
	assert.InDelta(t, 6*(19*0.4+10*1.6)/1e6, sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`), 1e-12)
	assert.NotContains(t, metrics, `agentc_serve_tokens_total{direction="input",model="backup"`, "a verdict is not served")
	assert.InDelta(t, meterSpend(t, g), spendMetric(t, g), 1e-12, "the metric is the meter's ledger")
}

// A summarizing compaction's summary call reported its model and request
// id as the request's: an answer whose upstream gave no request id came
// back with the summary's. Its spend is counted as the meter charges it.
func TestASummaryCallIsNotTheServedModel(t *testing.T) {
	answer := reply{body: transcript(t, "openai", "text.sse")}
	summary := reply{body: transcript(t, "anthropic", "text.sse"), header: map[string]string{"request-id": "req_summary"}}
	var oa, an []reply
	for range 2 * len(ownCallRoutes) {
		oa, an = append(oa, answer), append(an, summary)
	}
	g := newGateway(t, `{use: "compaction", strategy: "summarize", model: "backup", max_tokens: 64, keep_recent: 1}, {use: "meter", scope: "global", budget: usd: 100}`, oa, an)
	long := strings.Repeat("The quarterly report lists every shipment and its route. ", 20)
	msgs := []map[string]string{{"role": "user", "content": long}, {"role": "assistant", "content": long}, {"role": "user", "content": "Hello"}}
	for _, r := range ownCallRoutes {
		for _, stream := range []bool{false, true} {
			code, h, body := do(t, "POST", g.url+r.path, clientKey, r.body(msgs, stream))
			require.Equal(t, http.StatusOK, code, "%s stream %v: %s", r.path, stream, body)
			assert.Empty(t, h.Get(r.header), "%s stream %v: the answer's upstream gave no request id", r.path, stream)
			assertServedByPrimary(t, body)
		}
	}
	require.Equal(t, 6, g.an.requests(), "each request was summarized")
	assert.InDelta(t, ownCallsCost(6), sample(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"}`), 1e-12)
	assert.InDelta(t, meterSpend(t, g), spendMetric(t, g), 1e-12, "the metric is the meter's ledger")
}
