package serve

import (
	"context"
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
