package openai_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/openai"
)

// sent is a request as the server received it.
type sent struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestRequestMatchesSDK: the client sends its request as the SDK's own
// streaming call does: the same method, path and headers (the key, the
// content type, the SDK's user agent and platform headers), and a body of
// the same JSON.
func TestRequestMatchesSDK(t *testing.T) {
	events := ssetest.Transcript(t, "text.sse")
	var (
		mu   sync.Mutex
		reqs []sent
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, sent{r.Method, r.URL.Path, r.Header.Clone(), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events)
	}))
	defer srv.Close()

	c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	ds, err := ssetest.Collect(t, c, benchRequest)
	require.NoError(t, err)
	require.NotEmpty(t, ds)

	sdk := oa.NewChatCompletionService(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	stream := sdk.NewStreaming(context.Background(), sdkParams())
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())

	require.Len(t, reqs, 2)
	ours, theirs := reqs[0], reqs[1]
	assert.Equal(t, theirs.method, ours.method)
	assert.Equal(t, theirs.path, ours.path)
	assert.Equal(t, "/v1/chat/completions", ours.path)
	assert.JSONEq(t, string(theirs.body), string(ours.body))
	ours.header.Del("Content-Length") // the bodies' spacing may differ
	theirs.header.Del("Content-Length")
	assert.Equal(t, theirs.header, ours.header)
	assert.Equal(t, "Bearer "+testKey, ours.header.Get("Authorization"))
	assert.NotEmpty(t, ours.header.Get("X-Stainless-Package-Version"))
}
