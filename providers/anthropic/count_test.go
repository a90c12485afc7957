package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// countServer answers every request with status and body, recording the
// last request's path, headers and body.
func countServer(t *testing.T, status int, body string) (*httptest.Server, *http.Request, *[]byte) {
	t.Helper()
	got := &http.Request{}
	var sent []byte
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*got = *r.Clone(context.Background())
		sent, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_count_1")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s, got, &sent
}

func TestCountTokensSendsTheCountableRequest(t *testing.T) {
	s, got, sent := countServer(t, http.StatusOK, `{"input_tokens": 1234}`)
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: s.URL})
	require.NoError(t, err)
	temp := 0.5
	req := hi()
	req.Temperature, req.MaxTokens, req.Stop = &temp, 100, []string{"END"}
	req.Tools = []runtime.ToolDef{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}}
	req.ToolChoice = "auto"
	req.Metadata = map[string]string{"user_id": "u-1"}
	req.Betas = []string{"token-efficient-tools-2025-02-19"}
	n, err := c.CountTokens(context.Background(), &req)
	require.NoError(t, err)
	assert.EqualValues(t, 1234, n)

	assert.Equal(t, "/v1/messages/count_tokens", got.URL.Path)
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "Bearer "+testKey, got.Header.Get("Authorization"))
	assert.Equal(t, "token-efficient-tools-2025-02-19", got.Header.Get("anthropic-beta"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(*sent, &body))
	assert.Equal(t, "claude-sonnet-4-5", body["model"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be kind"}}, body["system"])
	assert.Len(t, body["messages"], 1)
	assert.Len(t, body["tools"], 1)
	assert.Equal(t, map[string]any{"type": "auto"}, body["tool_choice"])
	for _, k := range []string{"stream", "max_tokens", "temperature", "stop_sequences", "metadata"} {
		assert.NotContains(t, body, k, "the endpoint takes no %s", k)
	}
}

func TestCountTokensFailureIsClassified(t *testing.T) {
	s, _, _ := countServer(t, http.StatusNotFound, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`)
	c, err := anthropic.New(anthropic.Config{Model: "claude-nope", APIKey: testKey, BaseURL: s.URL})
	require.NoError(t, err)
	req := hi()
	_, err = c.CountTokens(context.Background(), &req)
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, http.StatusNotFound, ce.Status)
	assert.Contains(t, err.Error(), "claude-nope")
}
