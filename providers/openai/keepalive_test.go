package openai_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// A stream that sends only keep-alives holds the call until the caller's
// context ends (the client sets no deadline of its own), then the call
// returns the context's error at once and the connection is closed.
func TestKeepAlivesOnlyEndAtTheCallersDeadline(t *testing.T) {
	srv, gone := ssetest.KeepAliveServer(t)
	c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Stream(ctx, &runtime.ChatRequest{Model: "m", MaxTokens: 10,
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(runtime.Delta) bool { return true })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed")
	}
}
