package serve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFallbackReportsTheServedModelsUsage: a fallback whose first model
// (Anthropic) reported its input in message_start, then failed with an
// overloaded_error, and whose second model (OpenAI) served the call. The
// response, which names the second model, reported the first one's input
// tokens added to the second's, and agentc_serve_tokens_total counted them
// for the second model. The response now reports what the model that served
// it reported, and the tokens metric counts that; the spend still counts
// both models, each at its own prices.
func TestFallbackReportsTheServedModelsUsage(t *testing.T) {
	billed := reply{body: strings.Replace(transcript(t, "anthropic", "error_first.sse"), `"input_tokens":12,`, `"input_tokens":100000,`, 1)}
	require.Contains(t, billed.body, `"input_tokens":100000,`)
	answer := reply{body: transcript(t, "openai", "text.sse")} // prompt_tokens 19, completion_tokens 10
	g := newGateway(t, `{use: "meter", budget: usd: 100}, {use: "fallback", models: ["backup", "primary"]}`,
		[]reply{answer, answer, answer}, []reply{billed, billed, billed})
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}

	c, err := g.openai(t).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "backup", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "primary", c.Model)
	assert.EqualValues(t, 19, c.Usage.PromptTokens, "the served model's report")
	assert.EqualValues(t, 10, c.Usage.CompletionTokens)

	s := g.openai(t).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "backup", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	require.NoError(t, s.Err())
	assert.EqualValues(t, 19, acc.Usage.PromptTokens, "the served model's report, streamed")

	m, err := g.anthropic(t).Messages.New(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	require.NoError(t, err)
	assert.EqualValues(t, "primary", m.Model)
	assert.EqualValues(t, 19, m.Usage.InputTokens, "the served model's report")
	assert.EqualValues(t, 10, m.Usage.OutputTokens)

	metrics := g.metrics(t)
	assert.Equal(t, 57.0, sample(t, metrics, `agentc_serve_tokens_total{direction="input",model="primary",tenant="acme"}`), "19 per call")
	assert.Equal(t, 30.0, sample(t, metrics, `agentc_serve_tokens_total{direction="output",model="primary",tenant="acme"}`))
	assert.NotContains(t, metrics, `agentc_serve_tokens_total{direction="input",model="backup"`, "the failed model served nothing")
	assert.InDelta(t, 3*0.3, sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"}`), 1e-4,
		"each failed call billed 100000 input tokens at 3 USD per million")
	assert.InDelta(t, 3*(19*0.4+10*1.6)/1e6, sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`), 1e-12)
}

// sample returns the value of the sample series in a scrape of the
// metrics, failing the test when there is none.
func sample(t *testing.T, metrics, series string) float64 {
	t.Helper()
	for line := range strings.Lines(metrics) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, "%s", line)
			return f
		}
	}
	t.Fatalf("no sample %s", series)
	return 0
}

// TestTokensCountOnlyWhatWasServed: an attempt that timed out before its
// first delta (504) served nothing; the provider billed its prompt, which
// the spend counts, but the tokens metric counts the tokens served.
func TestTokensCountOnlyWhatWasServed(t *testing.T) {
	g := newGateway(t, `{use: "retry", max_attempts: 1, attempt_timeout: "50ms"}`,
		[]reply{{body: transcript(t, "openai", "text.sse"), gate: make(chan struct{})}}, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	require.Equal(t, http.StatusGatewayTimeout, code, body)
	metrics := g.metrics(t)
	assert.Greater(t, sample(t, metrics, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`), 0.0,
		"the prompt the provider read is spent")
	assert.NotContains(t, metrics, `agentc_serve_tokens_total{direction="input",model="primary"`, "nothing was served")
}

// TestRetriesCountEveryAttempt: a retry inside a fallback (docs/serve.md's
// policy to serve) retries each model; the retries metric counts every
// attempt beyond the first, the first model's included.
func TestRetriesCountEveryAttempt(t *testing.T) {
	down := reply{status: 500, body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}
	g := newGateway(t, `{use: "fallback", models: ["primary", "backup"]}, {use: "retry", max_attempts: 3, initial_delay: "1ms", max_delay: "1ms"}`,
		[]reply{down, down, down}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	require.Equal(t, http.StatusOK, code, body)
	metrics := g.metrics(t)
	assert.Equal(t, 3.0, sample(t, metrics, `agentc_serve_retries_total{stage="chat"}`), "3 attempts on primary, 1 on backup")
	assert.Equal(t, 1.0, sample(t, metrics, `agentc_serve_fallbacks_total{requested="primary",served="backup"}`))
}
