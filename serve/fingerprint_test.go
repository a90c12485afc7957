package serve

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSystemFingerprintIsRelayed: the upstream's system_fingerprint (how
// OpenAI tells whether seeded answers are comparable) was dropped from
// chat completions, whole and streamed. It is relayed; a Claude model,
// which has none, gives none.
func TestSystemFingerprintIsRelayed(t *testing.T) {
	text := reply{body: transcript(t, "openai", "text.sse")}
	g := newGateway(t, `{use: "tracing"}`, []reply{text, text}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	params := openai.ChatCompletionNewParams{Model: "primary", Seed: openai.Int(7),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	c, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, "fp_6ec83003ad", c.SystemFingerprint)

	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
	n := 0
	for stream.Next() {
		assert.Equal(t, "fp_6ec83003ad", stream.Current().SystemFingerprint, "chunk %d: %s", n, stream.Current().RawJSON())
		n++
	}
	require.NoError(t, stream.Err())
	require.NotZero(t, n)

	params.Model = "backup"
	c, err = g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.NotContains(t, c.RawJSON(), "system_fingerprint")
}
