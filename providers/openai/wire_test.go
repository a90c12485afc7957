package openai_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/internal/ssetest"
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

func TestRetryHeadersOfAnErrorResponse(t *testing.T) {
	ssetest.RunStatusCases(t, testKey, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) }, hi(), []ssetest.StatusCase{
		ssetest.Case("503 retry-after", 503, map[string]string{"Retry-After": "3"}, `{"error":{"message":"x","type":"server_error"}}`, runtime.KindTransient, 3e9, "503 Service Unavailable"),
		ssetest.Case("500 x-should-retry false", 500, map[string]string{"X-Should-Retry": "false", "Retry-After": "3"}, `{"error":{"message":"x","type":"server_error"}}`, runtime.KindPermanent, 0, "500 Internal Server Error"),
		ssetest.Case("400 x-should-retry true", 400, map[string]string{"X-Should-Retry": "true", "Retry-After-Ms": "250"}, `{"error":{"message":"x","type":"x"}}`, runtime.KindTransient, 25e7, "400 Bad Request"),
		ssetest.Case("429 x-should-retry false", 429, map[string]string{"X-Should-Retry": "false"}, "429.json", runtime.KindPermanent, 0, "429 Too Many Requests"),
	})
}
