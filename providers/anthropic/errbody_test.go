package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// An upstream failing with an endless body is read only up to a bound:
// the call fails with the status, and the client stops reading long before
// the upstream stops writing.
func TestEndlessErrorBodyIsCut(t *testing.T) {
	const endless = 64 << 20
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		chunk := make([]byte, 64<<10)
		for i := range chunk {
			chunk[i] = 'x'
		}
		for written.Load() < endless {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	err = c.Stream(context.Background(), &runtime.ChatRequest{Model: "m", MaxTokens: 10,
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(runtime.Delta) bool { return true })
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, http.StatusBadGateway, ce.Status)
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(endless/4), "the body was not read to its end")
}
