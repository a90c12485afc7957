package openai_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// An OpenAI-compatible server that puts an HTTP status in the error's code
// (OpenRouter, vLLM) has its error classified by that status: a 429 is
// rate limited, a 403 (a moderation flag) permanent.
func TestErrorEventWithAStatusCode(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_status_first.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Empty(t, ds)
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindRateLimited, ce.Kind)
	assert.Contains(t, err.Error(), "openai gpt-4.1-mini: stream error before any output: 429: Rate limit exceeded: free-models-per-min")

	s = ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_status_mid_stream.sse")})
	ds, err = ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "The answer", ssetest.Text(ds))
	ce = ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.Contains(t, err.Error(), "stream failed mid-stream after 1 deltas: 403: Your chosen model requires moderation")

	// vLLM's error names its type and its status.
	s = ssetest.New(t, ssetest.Reply{Body: `data: {"error":{"object":"error","message":"max_tokens must be at least 1","type":"BadRequestError","param":null,"code":400}}` + "\n\n"})
	_, err = ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, runtime.KindPermanent, ssetest.CallError(t, err, testKey).Kind)
}

// An error with neither a type nor a code is named by its message alone.
func TestErrorEventWithoutAType(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: `data: {"error":{"message":"upstream went away"}}` + "\n\n"})
	_, err := ssetest.Collect(t, client(t, s), hi())
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "openai gpt-4.1-mini: stream error before any output: upstream went away")
	assert.NotContains(t, err.Error(), ": :")
}

// The OpenAI API ends every stream with the usage chunk and [DONE]: one
// cut after the finish reason but before both has lost the report of what
// the call billed, and is truncated (the runtime then estimates the
// usage). With the usage, the missing [DONE] loses nothing.
func TestOpenAIStreamCutBeforeItsUsageIsTruncated(t *testing.T) {
	events := ssetest.Events(ssetest.Transcript(t, "text.sse"))
	require.Len(t, events, 13, "a role chunk, nine text chunks, the finish, the usage, [DONE]")
	official := func(body string) *openai.Client {
		c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, HTTPClient: ssetest.NewTransport(body).Client()})
		require.NoError(t, err)
		return c
	}

	ds, err := ssetest.Collect(t, official(strings.Join(events[:11], "")), hi())
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "the stream ended before the response was complete (after 9 deltas)")

	ds, err = ssetest.Collect(t, official(strings.Join(events[:12], "")), hi())
	require.NoError(t, err)
	assert.Equal(t, runtime.Delta{FinishReason: "stop", Usage: runtime.Usage{InputTokens: 19, OutputTokens: 10}}, ds[len(ds)-1])

	// Another server may end without [DONE] and without a usage report
	// (llama.cpp forks, older text-generation-inference): its finish
	// reason completes the response.
	s := ssetest.New(t, ssetest.Reply{Body: strings.Join(events[:11], "")})
	ds, err = ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, runtime.Delta{FinishReason: "stop"}, ds[len(ds)-1])
}

func TestRetryHeadersOfAnErrorResponse(t *testing.T) {
	ssetest.RunStatusCases(t, testKey, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) }, hi(), []ssetest.StatusCase{
		ssetest.Case("503 retry-after", 503, map[string]string{"Retry-After": "3"}, `{"error":{"message":"x","type":"server_error"}}`, runtime.KindTransient, 3e9, "503 Service Unavailable"),
		ssetest.Case("500 x-should-retry false", 500, map[string]string{"X-Should-Retry": "false", "Retry-After": "3"}, `{"error":{"message":"x","type":"server_error"}}`, runtime.KindTransient, 3e9, "500 Internal Server Error").Hinted(runtime.RetryNo),
		ssetest.Case("400 x-should-retry true", 400, map[string]string{"X-Should-Retry": "true", "Retry-After-Ms": "250"}, `{"error":{"message":"x","type":"x"}}`, runtime.KindPermanent, 25e7, "400 Bad Request").Hinted(runtime.RetryYes),
		ssetest.Case("429 x-should-retry false", 429, map[string]string{"X-Should-Retry": "false"}, "429.json", runtime.KindRateLimited, 0, "429 Too Many Requests").Hinted(runtime.RetryNo),
		ssetest.Case("context length x-should-retry true", 400, map[string]string{"X-Should-Retry": "true"}, `{"error":{"message":"x","type":"invalid_request_error","code":"context_length_exceeded"}}`, runtime.KindPermanent, 0, "context_length_exceeded"),
	})
}
