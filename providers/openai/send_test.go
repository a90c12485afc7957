package openai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// TestFailedRequestErrorMatchesSDK: a status of 400 or more comes back as
// the SDK's streaming call returns it: an *openai.Error of the same
// status, type, code, message and text, with the response's headers.
// (The SDK reads nothing of a body of another shape, whose message the
// client keeps: TestUnwrappedErrorBodiesKeepTheirMessage.)
func TestFailedRequestErrorMatchesSDK(t *testing.T) {
	for name, body := range map[string]string{
		"error":      `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		"empty body": ``,
		"empty json": `{}`,
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
	require.ErrorIs(t, err, wire.ErrOtherOrigin)
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

// TestUnwrappedErrorBodiesKeepTheirMessage: the error bodies of servers
// that speak the API without OpenAI's {"error":{...}} wrapping (vLLM's
// bare error object, a string "error", FastAPI's "detail", plain text)
// keep their message, scrubbed of the key, with vLLM's type and param;
// its numeric code is the status, not a code. The *openai.Error's text is
// still the SDK's status summary.
func TestUnwrappedErrorBodiesKeepTheirMessage(t *testing.T) {
	const errKey = "sk-test-0123456789abcdef"
	long := strings.Repeat("é", maxErrorText)
	for _, tc := range []struct {
		name, body, message string
		detail              wire.Detail
	}{
		{"vLLM", `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":"messages","code":%d}`,
			"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
			wire.Detail{Provider: "openai", Type: "BadRequestError", Param: "messages", ContextLength: true}},
		{"vLLM echoing the key", `{"object":"error","message":"bad key ` + errKey + `","type":"BadRequestError","param":null,"code":%d}`,
			"bad key [redacted]", wire.Detail{Provider: "openai", Type: "BadRequestError"}},
		{"error string", `{"error":"model 'llama3' not found, try pulling it first"}`,
			"model 'llama3' not found, try pulling it first", wire.Detail{Provider: "openai"}},
		{"FastAPI detail", `{"detail":"Model qwen2 is not served here"}`, "Model qwen2 is not served here", wire.Detail{Provider: "openai"}},
		{"FastAPI validation", `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`,
			`[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]`, wire.Detail{Provider: "openai"}},
		{"plain text", "\nupstream connect error: key=" + errKey + "\n", "upstream connect error: key=[redacted]", wire.Detail{Provider: "openai"}},
		{"long plain text", long + "tail", long[:maxErrorText] + "…", wire.Detail{Provider: "openai"}},
	} {
		for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError} {
			t.Run(fmt.Sprintf("%s %d", tc.name, status), func(t *testing.T) {
				body := tc.body
				if strings.Contains(body, "%d") {
					body = fmt.Sprintf(body, status)
				}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(status)
					_, _ = io.WriteString(w, body)
				}))
				defer srv.Close()
				c, err := New(Config{Model: "llama3", APIKey: errKey, BaseURL: srv.URL + "/v1"})
				require.NoError(t, err)

				_, err = c.send.post(context.Background(), []byte(`{"stream":true}`))
				var e *oa.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, status, e.StatusCode)
				assert.Equal(t, fmt.Sprintf("OpenAI API error: %d %s", status, http.StatusText(status)), e.Error())

				err = c.Stream(context.Background(), &runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
					func(runtime.Delta) bool { return true })
				ce := ssetest.CallError(t, err, errKey)
				assert.Equal(t, status, ce.Status)
				text := fmt.Sprintf("openai llama3: %d %s: ", status, http.StatusText(status))
				if tc.detail.Type != "" {
					text += strconv.Itoa(status) + ": "
				}
				assert.Equal(t, text+tc.message, err.Error())
				assert.Equal(t, &tc.detail, wire.DetailOf(err))
			})
		}
	}
}
