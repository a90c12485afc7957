package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedServer serves keysPolicy: alice by hash, bob from BOB_KEY.
func keyedServer(t *testing.T) *served {
	t.Helper()
	return startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("alice-key")))),
		LookupEnv: func(k string) (string, bool) { return map[string]string{"BOB_KEY": "bob-key"}[k], k == "BOB_KEY" }})
}

// An OpenAI SDK client configured as Azure's are, its key in api-key and
// no bearer token, is served.
func TestAzureStyleClientIsServed(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	g := newGateway(t, "", []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	c := openai.NewClient(option.WithBaseURL(g.url+"/v1/"), option.WithHeader("api-key", clientKey), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices)
	assert.NotEmpty(t, resp.Choices[0].Message.Content)

	bad := openai.NewClient(option.WithBaseURL(g.url+"/v1/"), option.WithHeader("api-key", "mallory"),
		option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	_, err = bad.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "conflicting API keys")
	assert.Equal(t, 1, g.oa.requests(), "the refused call reaches no upstream")
}

// A key in the URL's query (?key=, ?api_key=...) is refused, a good key
// in a header beside it or not: the gateway reads keys from headers only,
// a URL's query is written to the logs of the proxies it crosses, and a
// proxy in front may have checked the one the gateway would not read.
func TestKeyInTheURLIsRefused(t *testing.T) {
	s := keyedServer(t)
	for _, q := range []string{"key=bob-key", "api_key=bob-key", "api-key=bob-key", "apikey=bob-key", "access_token=bob-key",
		"API_KEY=bob-key", "x-api-key=bob-key", "token=bob-key", "a=1;key=bob-key", "k%65y=bob-key", "limit=5&Api%5FKey=bob-key"} {
		t.Run(q, func(t *testing.T) {
			code, h, body := do(t, "GET", s.url+"/v1/models?"+q, "", nil)
			assert.Equal(t, http.StatusUnauthorized, code, body)
			assert.Contains(t, body, "in the URL")
			assert.NotContains(t, body, "bob-key", "the key is not echoed")
			assert.NotEmpty(t, h.Get("WWW-Authenticate"))

			code, _, body = do(t, "GET", s.url+"/v1/models?"+q, "alice-key", nil)
			assert.Equal(t, http.StatusUnauthorized, code, body)
			assert.Contains(t, body, "in the URL")
		})
	}
	// Other query parameters are no key.
	code, _, body := do(t, "GET", s.url+"/v1/models?limit=5&api-version=2024-10-21", "alice-key", nil)
	assert.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, s.logs.String(), "bob-key", "a key in the URL is not logged")
}

// A key's variable is read at every load: a reload that finds another
// value admits the new key and refuses the old one at once; a reload that
// finds it unset fails, naming the variable, and the previous policy
// serves on with the keys it read (to revoke a key, remove it from the
// policy).
func TestKeyVariableIsReadAgainAtReload(t *testing.T) {
	var mu sync.Mutex
	env := map[string]string{"BOB_KEY": "bob-key"}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("alice-key")))), WatchInterval: -1,
		LookupEnv: func(k string) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			v, ok := env[k]
			return v, ok
		}})
	set := func(v string, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			env["BOB_KEY"] = v
		} else {
			delete(env, "BOB_KEY")
		}
	}
	status := func(key string) int {
		code, _, _ := do(t, "GET", s.url+"/v1/models", key, nil)
		return code
	}
	require.Equal(t, http.StatusOK, status("bob-key"))

	set("bob-key-2", true)
	require.NoError(t, s.srv.Reload(context.Background()))
	assert.Equal(t, http.StatusUnauthorized, status("bob-key"), "the rotated key is refused at once")
	assert.Equal(t, http.StatusOK, status("bob-key-2"))

	set("", false)
	err := s.srv.Reload(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BOB_KEY is not set")
	assert.NotContains(t, err.Error(), "bob-key-2")
	assert.Equal(t, http.StatusOK, status("bob-key-2"), "the previous policy serves on")
	assert.Equal(t, http.StatusOK, status("alice-key"))
	assert.Contains(t, scrape(t, s.url), `agentc_serve_reloads_total{result="failed"} 1`)
}

// A key sent in Authorization without the Bearer scheme (the key alone,
// Basic credentials) was answered "missing API key", though the caller
// had sent one: the answer, in either API's error document, now says the
// header needs the Bearer scheme, or which other header to use.
func TestAuthorizationWithoutBearerIsNamed(t *testing.T) {
	s := keyedServer(t)
	body := []byte(`{"model":"primary","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	for _, route := range []struct{ path, shape string }{
		{"/v1/chat/completions", `{"error":{"message":"the Authorization header`},
		{"/v1/messages", `{"error":{"type":"authentication_error","message":"the Authorization header`},
	} {
		for _, auth := range []string{"bob-key", "Basic Ym9iLWtleQ==", "Bearerbob-key", "Token bob-key"} {
			t.Run(route.path+"/"+auth, func(t *testing.T) {
				code, h, got := do(t, "POST", s.url+route.path, "", body, "Authorization", auth, "Content-Type", "application/json")
				assert.Equal(t, http.StatusUnauthorized, code, got)
				assert.Contains(t, got, route.shape)
				assert.Contains(t, got, "the Authorization header does not use the Bearer scheme")
				assert.Contains(t, got, "x-api-key: KEY")
				assert.NotContains(t, got, "missing API key")
				assert.NotContains(t, got, "bob-key", "the key is not echoed")
				assert.NotEmpty(t, h.Get("WWW-Authenticate"))
			})
		}
	}
	// Beside a key in another header, an Authorization header meant for
	// something else (a proxy's Basic credentials) is not the key.
	code, _, got := do(t, "GET", s.url+"/v1/models", "", nil, "Authorization", "Basic cHJveHk6cHc=", "x-api-key", "bob-key")
	assert.Equal(t, http.StatusOK, code, got)
	code, _, got = do(t, "GET", s.url+"/v1/models", "", nil, "Authorization", "Bearer")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, got, "missing API key", "an empty bearer token is no key")
}
