package openai_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// An upstream that sends one event of endless data lines is read only up
// to the event bound: the call fails naming the limit, and the client stops
// reading long before the upstream stops writing.
func TestEndlessEventIsCut(t *testing.T) {
	srv, written := ssetest.EndlessEventServer(t, "")
	c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	req := hi()
	err = c.Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
	ssetest.CallError(t, err, testKey)
	assert.ErrorIs(t, err, wire.ErrEventTooLarge)
	assert.Contains(t, err.Error(), "16 MiB")
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(wire.MaxEventBytes+4<<20), "the event was not read to its end")
}
