package serve

import (
	"context"
	"os"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rsAnswer is what a Responses client of the gateway gets, streamed or
// not: the status, its reason, and each message item's part types and
// texts.
type rsAnswer struct {
	status, reason string
	parts          [][2]string
}

// askResponses asks model through the Responses route, streaming or not.
func (g *gateway) askResponses(t *testing.T, model string, stream bool) rsAnswer {
	t.Helper()
	params := responses.ResponseNewParams{Model: model, Input: rsText("Hello")}
	var r *responses.Response
	if !stream {
		var err error
		r, err = g.openai(t).Responses.New(context.Background(), params)
		require.NoError(t, err)
	} else {
		s := g.openai(t).Responses.NewStreaming(context.Background(), params)
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
				resp := ev.Response
				r = &resp
			}
		}
		require.NoError(t, s.Err())
		require.NotNil(t, r, "the stream ended without the response")
	}
	a := rsAnswer{status: string(r.Status), reason: string(r.IncompleteDetails.Reason)}
	for _, it := range r.Output {
		for _, c := range it.Content {
			text := c.Text
			if c.Type == "refusal" {
				text = c.Refusal
			}
			a.parts = append(a.parts, [2]string{c.Type, text})
		}
	}
	return a
}

// A Claude refusal explained by its stop_details (the answer cut, then
// the explanation) reached each client otherwise streamed than not: a
// Chat Completions client got content null and the answer run into the
// explanation as the refusal whole, where the stream sent the answer as
// content and the explanation as the refusal; a Responses client's
// stream ended incomplete (content_filter), where the whole response was
// completed with its refusal part. Each client gets one form, streamed or
// not: the answer as text, the explanation as the refusal (for an
// Anthropic client, a text block of its own), the response complete, as a
// refusal of the API's is.
func TestRefusalExplanationIsTheSameStreamedOrNot(t *testing.T) {
	sse, err := os.ReadFile("../providers/anthropic/testdata/refusal.sse")
	require.NoError(t, err)
	const answer, why = "Here is how to", "The request asks for help writing malware."
	for _, stream := range []bool{false, true} {
		g := newGateway(t, typicalChain, nil, []reply{{body: string(sse)}, {body: string(sse)}, {body: string(sse)}})
		assert.Equal(t, openAIAnswer{content: answer, refusal: why, finish: "stop"}, g.askOpenAI(t, "backup", stream), "stream %v", stream)

		msg := g.askAnthropic(t, "backup", stream)
		require.Len(t, msg.Content, 2, "stream %v", stream)
		assert.Equal(t, answer, msg.Content[0].Text)
		assert.Equal(t, why, msg.Content[1].Text)
		assert.Equal(t, anthropic.StopReasonRefusal, msg.StopReason)

		assert.Equal(t, rsAnswer{status: "completed", parts: [][2]string{{"output_text", answer}, {"refusal", why}}},
			g.askResponses(t, "backup", stream), "stream %v", stream)
	}
}
