package anthropic_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// An upstream failing with an endless body is read only up to a bound:
// the call fails with the status, and the client stops reading long before
// the upstream stops writing.
func TestEndlessErrorBodyIsCut(t *testing.T) {
	srv, written := ssetest.EndlessErrorServer(t, http.StatusBadGateway)
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	err = c.Stream(context.Background(), &runtime.ChatRequest{Model: "m", MaxTokens: 10,
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(runtime.Delta) bool { return true })
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, http.StatusBadGateway, ce.Status)
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(ssetest.EndlessBody/4), "the body was not read to its end")
}

// A token count answered with an endless body is read only up to a bound
// (a count's response is a few bytes; the SDK reads the body whole): the
// call fails naming the limit, and the client stops reading long before the
// upstream stops writing.
func TestEndlessCountBodyIsCut(t *testing.T) {
	srv, written := ssetest.EndlessServer(t, http.StatusOK, "application/json", `{"input_tokens": 5, "x": "`, bytes.Repeat([]byte{'x'}, 64<<10))
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = c.CountTokens(context.Background(), &runtime.ChatRequest{Model: "m",
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.ErrorIs(t, err, wire.ErrResponseTooLarge)
	assert.Contains(t, err.Error(), "1 MiB")
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(ssetest.EndlessBody/4), "the body was not read to its end")
}
