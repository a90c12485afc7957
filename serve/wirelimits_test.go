package serve

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An Anthropic client's stop_sequences have no bound of 4, and five went
// to an OpenAI model as five stop entries, which the Chat Completions API
// refuses (the gateway's own OpenAI route refuses more than 4). The
// OpenAI model refuses the call with a 400 naming the limit, before
// sending it; under a fallback, the call falls over to a Claude model,
// which takes them.
func TestMoreStopSequencesThanAnOpenAIModelTakes(t *testing.T) {
	five := []string{"a", "b", "c", "d", "e"}
	params := anthropic.MessageNewParams{Model: "primary", MaxTokens: 64, StopSequences: five,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}
	g := newGateway(t, `{use: "tracing"},`, nil, nil)
	_, err := g.anthropic(t).Messages.New(context.Background(), params)
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.Error(), "5 stop sequences, more than the 4 an OpenAI-shaped model takes")
	assert.Equal(t, 0, g.oa.requests(), "the call is refused before it is sent")

	g = newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	msg, err := g.anthropic(t).Messages.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "backup", string(msg.Model))
	assert.Equal(t, 0, g.oa.requests())
	assert.Equal(t, []any{"a", "b", "c", "d", "e"}, sentTo(t, g.an, 0)["stop_sequences"])
}

// docs/serve.md's errors table says a 429 carries Retry-After; an
// upstream's 429 that named no delay reached the client without one. It
// carries a second, on every route, streamed or not.
func TestUpstream429WithoutADelayCarriesRetryAfter(t *testing.T) {
	for _, model := range []string{"primary", "backup"} {
		body := `{"error": {"message": "Rate limit reached.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`
		if model == "backup" {
			body = `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached."}}`
		}
		r := reply{status: http.StatusTooManyRequests, body: body}
		oa, an := []reply{r, r, r, r, r, r}, []reply(nil)
		if model == "backup" {
			oa, an = nil, oa
		}
		g := newGateway(t, `{use: "tracing"}`, oa, an)
		for _, stream := range []bool{false, true} {
			for route, b := range map[string][]byte{
				"/v1/chat/completions": chatBody(model, "hi", stream),
				"/v1/messages":         messagesBody(model, "hi", stream),
				"/v1/responses":        []byte(fmt.Sprintf(`{"model": %q, "input": "hi", "stream": %v}`, model, stream)),
			} {
				code, h, resp := do(t, "POST", g.url+route, clientKey, b, "anthropic-version", "2023-06-01")
				require.Equal(t, http.StatusTooManyRequests, code, "%s %s stream %v: %s", model, route, stream, resp)
				assert.Equal(t, "1", h.Get("Retry-After"), "%s %s stream %v", model, route, stream)
			}
		}
	}
}
