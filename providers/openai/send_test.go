package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// TestFailedRequestErrorMatchesSDK: a status of 400 or more comes back as
// the SDK's streaming call returns it: an *openai.Error of the same
// status, type, code, message and text, with the response's headers.
func TestFailedRequestErrorMatchesSDK(t *testing.T) {
	for name, body := range map[string]string{
		"error":      `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		"no error":   `{"detail":"busy"}`,
		"not json":   `upstream busy`,
		"empty body": ``,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			c, err := New(Config{Model: "gpt-4.1-mini", APIKey: "sk-test", BaseURL: srv.URL + "/v1"})
			require.NoError(t, err)
			_, ours := c.send.post(context.Background(), []byte(`{"stream":true}`))

			sdk := oa.NewChatCompletionService(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
			stream := sdk.NewStreaming(context.Background(), oa.ChatCompletionNewParams{})
			theirs := stream.Err()
			_ = stream.Close()

			require.Error(t, theirs)
			require.Error(t, ours)
			assert.Equal(t, theirs.Error(), ours.Error())
			var a, b *oa.Error
			if assert.ErrorAs(t, theirs, &a) && assert.ErrorAs(t, ours, &b) {
				assert.Equal(t, a.StatusCode, b.StatusCode)
				assert.Equal(t, [4]string{a.Type, a.Code, a.Message, a.Param}, [4]string{b.Type, b.Code, b.Message, b.Param})
				assert.Equal(t, "7", b.Response.Header.Get("Retry-After"))
			}
		})
	}
}

// TestRedirectToAnotherOriginIsRefused: as the SDK's client, the client
// follows no redirect to another origin than its base URL's, so the key
// goes nowhere else; a redirect on the same origin is followed.
func TestRedirectToAnotherOriginIsRefused(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions":
			if r.URL.Query().Get("here") != "" {
				http.Redirect(w, r, "/v1/moved", http.StatusTemporaryRedirect)
				return
			}
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/v1/moved":
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	defer srv.Close()
	c, err := New(Config{Model: "gpt-4.1-mini", APIKey: "sk-test", BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	_, err = c.send.post(context.Background(), []byte(`{}`))
	require.ErrorIs(t, err, errOtherOrigin)
	assert.Zero(t, elsewhere.Load(), "nothing reached the other origin")

	c.send.url += "?here=1"
	res, err := c.send.post(context.Background(), []byte(`{}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// TestUnusableBaseURLFailsTheCall: a base URL the SDK cannot parse fails
// each call with the SDK's error, as the SDK's own call did, and not New.
func TestUnusableBaseURLFailsTheCall(t *testing.T) {
	c, err := New(Config{Model: "gpt-4.1-mini", BaseURL: "http://[::1"})
	require.NoError(t, err)
	err = c.Stream(context.Background(), &runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(runtime.Delta) bool { return true })
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Error(), `missing ']' in host`)
}

// An endless error body is read up to maxErrorBody: the call fails with a
// status error, its memory bounded.
func TestEndlessErrorBodyIsCut(t *testing.T) {
	srv, _ := ssetest.EndlessErrorServer(t, http.StatusBadGateway)
	c, err := New(Config{Model: "gpt-4.1-mini", APIKey: "sk-test", BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	_, err = c.send.post(context.Background(), []byte(`{"stream":true}`))
	var e *oa.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, http.StatusBadGateway, e.StatusCode)
	body, _ := io.ReadAll(e.Response.Body)
	assert.Len(t, body, maxErrorBody, "the error keeps what was read")
}
