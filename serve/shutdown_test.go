package serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownCutEndsStreamsWithAnErrorEvent: a stream still open at the
// end of the grace period was cut by closing its connection, so its client
// read a truncated body (an unexpected EOF) and could not tell a shutdown
// from a network fault. The requests are now cancelled first and each ends
// as a failure does: a stream under way with an error event naming the
// shutdown, a call not yet answered with a 503 and Retry-After, which the
// SDKs read and may retry on another replica.
func TestShutdownCutEndsStreamsWithAnErrorEvent(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	held := func(provider string, after int) reply {
		return reply{body: transcript(t, provider, "text.sse"), gate: gate, holdAfter: after}
	}
	// Each reply holds after its first text delta.
	g := newGateway(t, typicalChain, []reply{held("openai", 2), held("openai", 2)}, []reply{held("anthropic", 4)},
		func(o *Options) { o.ShutdownTimeout = 300 * time.Millisecond })

	oa := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
	require.True(t, oa.Next(), "%v", oa.Err())
	an := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	require.True(t, an.Next(), "%v", an.Err())
	whole := make(chan error, 1)
	go func() {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
		whole <- err
	}()
	require.Eventually(t, func() bool { return g.oa.requests() == 2 }, 5*time.Second, 5*time.Millisecond)

	stopped := make(chan error, 1)
	go func() { stopped <- g.stop() }()

	for oa.Next() {
	}
	require.Error(t, oa.Err(), "the OpenAI stream ends with an error, not a truncated body")
	assert.Contains(t, oa.Err().Error(), "shutting down")
	assert.NotContains(t, oa.Err().Error(), "EOF")

	for an.Next() {
	}
	require.Error(t, an.Err(), "the Anthropic stream ends with an error event")
	assert.Contains(t, an.Err().Error(), "shutting down")
	var ae *anthropic.Error
	require.True(t, errors.As(an.Err(), &ae) || strings.Contains(an.Err().Error(), "overloaded_error"), "%v", an.Err())

	err := <-whole
	var oe *openai.Error
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.Equal(t, http.StatusServiceUnavailable, oe.StatusCode)
	assert.Contains(t, oe.Message, "shutting down")
	assert.Equal(t, "1", oe.Response.Header.Get("Retry-After"))

	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	logs := g.logs.String()
	assert.Contains(t, logs, "status=503")
	assert.Contains(t, logs, "shutting down")
}
