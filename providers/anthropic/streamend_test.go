package anthropic_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
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
