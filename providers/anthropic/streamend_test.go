package anthropic_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// A server that holds the response open after message_stop (a proxy that
// keeps the connection, pings after the end) does not hold the answer: the
// stream ends at message_stop, as OpenAI's ends at [DONE], and the
// connection is closed.
func TestResponseHeldOpenAfterMessageStopIsLeftPromptly(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	start := time.Now()
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	assert.Equal(t, "stop", ds[len(ds)-1].FinishReason)
	ssetest.AssertLeftPromptly(t, s, start)
}

// Events after message_stop are not the message's: their text is not read
// into the answer (an Anthropic client of the API stops there too).
func TestEventsAfterMessageStopAreNotRead(t *testing.T) {
	after := "event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" and more"}}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":1}}` + "\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse") + after})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	assert.Equal(t, "stop", ds[len(ds)-1].FinishReason)
	assert.EqualValues(t, 15, sum(ds).OutputTokens)
}

// A stream that reaches message_stop without a message_delta has no stop
// reason and no output count: it is truncated, as a stream that never
// reached message_stop, not a complete answer ending in "stop" (which a
// memoize would keep and a meter would charge no output for). The error
// carries no output count, so the runtime estimates the output from the
// text that arrived.
func TestMessageStopWithoutAStopReasonIsTruncated(t *testing.T) {
	var kept []string
	for _, e := range ssetest.Events(ssetest.Transcript(t, "text.sse")) {
		if !strings.HasPrefix(e, "event: message_delta") {
			kept = append(kept, e)
		}
	}
	s := ssetest.New(t, ssetest.Reply{Body: strings.Join(kept, "")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	for _, d := range ds {
		assert.Empty(t, d.FinishReason, "no delta finishes the answer")
	}
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "the stream ended before the response was complete (after 3 deltas)")
	assert.Equal(t, runtime.Usage{InputTokens: 472}, sum(ds), "the input rode on the first delta")
	assert.Zero(t, ce.Usage.OutputTokens, "no output count was reported: the runtime estimates it")
}
