package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An upstream's absurd usage report (2e9 prompt tokens) was priced raw by
// the spend metric (two million dollars at the policy's prices, where the
// ledger held another figure) and counted raw by the tokens metric. The
// meter charges the ledger to its ceiling, and the metrics count that
// charge. The next call is refused with the figures printed as money.
func TestAbsurdUsageMetricsCountTheCharge(t *testing.T) {
	absurd := strings.Replace(transcript(t, "openai", "text.sse"), `"prompt_tokens":19`, `"prompt_tokens":2000000000`, 1)
	require.Contains(t, absurd, `"prompt_tokens":2000000000`)
	g := newGateway(t, `{use: "meter", scope: "key", budget: usd: 100}`, []reply{{body: absurd}}, nil)
	req := []byte(`{"model":"primary","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	_, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, req)
	assert.Contains(t, body, "reported absurd usage (input_tokens 2000000000")
	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"} 100`+"\n", "the ledger's charge, to its ceiling")
	assert.Contains(t, m, `agentc_serve_tokens_total{direction="input",model="primary",tenant="acme"} 1e+09`+"\n", "the tokens charged, at the cap")

	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, req)
	assert.Equal(t, 402, code)
	assert.Contains(t, body, "usd ceiling 100 reached (spent 100)")
}

// Without a meter no layer settles an absurd report, and the metrics
// priced it raw: a report of 2e9 prompt tokens added $800 to the spend
// and 2e9 tokens, and a negative count, read as 2^63-1, some 3.7e12
// dollars and 9.2e18 tokens, to counters that never come down. They count
// it as a meter with on_error "open" charges it: each absurd count a
// billion tokens.
func TestAbsurdUsageWithoutAMeterCountsTheCap(t *testing.T) {
	for name, count := range map[string]string{"large": "2000000000", "negative": "-5"} {
		t.Run(name, func(t *testing.T) {
			absurd := strings.Replace(transcript(t, "openai", "text.sse"), `"prompt_tokens":19`, `"prompt_tokens":`+count, 1)
			require.Contains(t, absurd, `"prompt_tokens":`+count)
			g := newGateway(t, "", []reply{{body: absurd}}, nil)
			req := []byte(`{"model":"primary","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
			code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, req)
			require.Equal(t, 200, code, body)
			m := g.metrics(t)
			assert.Contains(t, m, `agentc_serve_tokens_total{direction="input",model="primary",tenant="acme"} 1e+09`+"\n", "the tokens at the cap")
			assert.Regexp(t, `agentc_serve_budget_spend_usd_total\{model="primary",tenant="acme"\} 400\.\d+\n`, m, "the cap at the model's prices")
		})
	}
}
