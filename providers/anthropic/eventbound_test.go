package anthropic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// An upstream that sends one event of endless data lines is read only up
// to the event bound: the call fails naming the limit, and the client stops
// reading long before the upstream stops writing (the SDK's decoder,
// which reads the stream, bounds no event).
func TestEndlessEventIsCut(t *testing.T) {
	start := "event: message_start\n" +
		`data: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_delta\n"
	srv, written := ssetest.EndlessEventServer(t, start)
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	err = c.Stream(context.Background(), &runtime.ChatRequest{Model: "m", MaxTokens: 10,
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(runtime.Delta) bool { return true })
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindPermanent, ce.Kind, "the same upstream sends the same event again")
	assert.ErrorIs(t, err, wire.ErrEventTooLarge)
	assert.Contains(t, err.Error(), "16 MiB")
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(wire.MaxEventBytes+4<<20), "the event was not read to its end")
}
