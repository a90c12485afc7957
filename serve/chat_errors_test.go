package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func chatBody(model, text string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	return b
}

func messagesBody(model, text string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "max_tokens": 64,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	return b
}

// openAIError decodes an OpenAI error body.
func openAIError(t *testing.T, body string) (typ, code, layer, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Type, Code, Layer, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Type, e.Error.Code, e.Error.Layer, e.Error.Message
}

// TestErrorMapping: every refusal and failure gets its status, the API's
// own error body, and Retry-After where the wait is known.
func TestErrorMapping(t *testing.T) {
	upstreamDown := reply{status: 500, body: `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`}
	tests := []struct {
		name     string
		chain    string
		upstream []reply
		first    int // the status of a first call in the run
		want     int
		typ      string
		code     string
		layer    string
		retry    bool // a Retry-After header
		msg      string
	}{
		{name: "budget", chain: `{use: "meter", name: "spend", budget: calls: 1}`,
			upstream: []reply{{body: transcript(t, "openai", "text.sse")}},
			first:    200, want: 402, typ: "insufficient_quota", code: "budget", layer: "spend", msg: "calls ceiling 1 reached"},
		{name: "rate limited", chain: `{use: "rate_limit", name: "per_key", rate: 1, per: "1m", mode: "reject", scope: "key"}`,
			upstream: []reply{{body: transcript(t, "openai", "text.sse")}},
			first:    200, want: 429, typ: "rate_limit_error", code: "rate_limited", layer: "per_key", retry: true},
		{name: "breaker open", chain: `{use: "retry", name: "guarded", max_attempts: 1, breaker: {failures: 1, cooldown: "1m"}}`,
			upstream: []reply{upstreamDown},
			first:    502, want: 503, typ: "server_error", code: "breaker_open", layer: "guarded", retry: true, msg: "circuit breaker open for primary"},
		{name: "upstream failure", chain: `{use: "retry", max_attempts: 2, initial_delay: "1ms"}`,
			upstream: []reply{upstreamDown, upstreamDown},
			want:     502, typ: "server_error", code: "transient", msg: "500 Internal Server Error"},
		{name: "upstream refuses", chain: `{use: "tracing"}`,
			upstream: []reply{{status: 400, body: transcript(t, "openai", "400_context_length.json")}},
			want:     400, typ: "invalid_request_error", code: "context_length_exceeded", msg: "context"},
		{name: "upstream timeout", chain: `{use: "retry", max_attempts: 1, attempt_timeout: "50ms"}`,
			upstream: []reply{{body: transcript(t, "openai", "text.sse"), gate: make(chan struct{})}},
			want:     504, typ: "timeout_error", code: "timeout", layer: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, tt.chain, tt.upstream, nil)
			url := g.url + "/v1/chat/completions"
			if tt.first != 0 {
				code, _, body := do(t, "POST", url, clientKey, chatBody("primary", "hi", false), RunHeader, "run-1")
				require.Equal(t, tt.first, code, body)
			}
			code, h, body := do(t, "POST", url, clientKey, chatBody("primary", "hi", false), RunHeader, "run-1")
			require.Equal(t, tt.want, code, body)
			typ, ecode, layer, msg := openAIError(t, body)
			assert.Equal(t, tt.typ, typ)
			if tt.code != "" {
				assert.Equal(t, tt.code, ecode)
			}
			assert.Equal(t, tt.layer, layer)
			assert.Contains(t, msg, tt.msg)
			if tt.retry {
				secs, err := strconv.Atoi(h.Get("Retry-After"))
				require.NoError(t, err, "Retry-After %q", h.Get("Retry-After"))
				assert.GreaterOrEqual(t, secs, 1)
			} else {
				assert.Empty(t, h.Get("Retry-After"))
			}
			g.noLeak(t, body)
		})
	}
}

// TestAnthropicErrorBodies: the same refusals in Anthropic's error format.
func TestAnthropicErrorBodies(t *testing.T) {
	g := newGateway(t, `{use: "meter", name: "spend", budget: calls: 1}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	url := g.url + "/v1/messages"
	code, _, body := do(t, "POST", url, "", messagesBody("backup", "hi", false), "x-api-key", clientKey, RunHeader, "r")
	require.Equal(t, 200, code, body)
	for _, tt := range []struct {
		name, key string
		body      []byte
		want      int
		typ       string
	}{
		{"budget", clientKey, messagesBody("backup", "hi", false), 402, "billing_error"},
		{"unknown model", clientKey, messagesBody("gpt-9", "hi", false), 404, "not_found_error"},
		{"malformed", clientKey, []byte(`{"model": "backup", "messages": [}`), 400, "invalid_request_error"},
		{"no key", "", messagesBody("backup", "hi", false), 401, "authentication_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", url, "", tt.body, "x-api-key", tt.key, RunHeader, "r")
			require.Equal(t, tt.want, code, body)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e))
			assert.Equal(t, "error", e.Type)
			assert.Equal(t, tt.typ, e.Error.Type)
			assert.NotEmpty(t, e.Error.Message)
		})
	}
	// The SDK surfaces it as its own error type.
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, anthropicoption.WithHeader(RunHeader, "r"))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 402, ae.StatusCode)
}

func TestBadRequests(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil, func(o *Options) {
		o.MaxBodyBytes = 4 << 10
		o.BodyTimeout = 300 * time.Millisecond
	})
	url := g.url + "/v1/chat/completions"
	for _, tt := range []struct {
		name string
		body string
		want int
		msg  string
	}{
		{"malformed JSON", "{\n  \"model\": \"primary\",\n  \"messages\": [\n}", 400, "malformed JSON at line 4, column 1"},
		{"empty body", "", 400, "want a JSON object"},
		{"wrong type", `{"model": "primary", "messages": "hi"}`, 400, "messages: want an array, got JSON string"},
		{"no model", `{"messages": [{"role": "user", "content": "hi"}]}`, 400, "model: required"},
		{"no messages", `{"model": "primary", "messages": []}`, 400, "messages: at least one message"},
		{"unknown role", `{"model": "primary", "messages": [{"role": "wizard", "content": "hi"}]}`, 400, `messages[0]: role: want`},
		{"bad tool arguments", `{"model": "primary", "messages": [{"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}`,
			400, "messages[0]: tool_calls[0].function.arguments: not valid JSON"},
		{"two choices", `{"model": "primary", "n": 2, "messages": [{"role": "user", "content": "hi"}]}`, 400, "n: only 1 choice"},
		// OpenAI refuses stream_options on a call that does not stream,
		// more than 4 stop sequences, and an empty array of parts.
		{"stream options without a stream", `{"model": "primary", "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]}`,
			400, "stream_options: only allowed when stream is true"},
		{"stream options on stream false", `{"model": "primary", "stream": false, "stream_options": {}, "messages": [{"role": "user", "content": "hi"}]}`,
			400, "stream_options: only allowed when stream is true"},
		{"five stop sequences", `{"model": "primary", "stop": ["a", "b", "c", "d", "e"], "messages": [{"role": "user", "content": "hi"}]}`,
			400, "stop: at most 4 sequences, got 5"},
		{"no content parts", `{"model": "primary", "messages": [{"role": "system", "content": []}, {"role": "user", "content": "hi"}]}`,
			400, "messages[0]: content: an empty array"},
		{"no content parts with tool calls", `{"model": "primary", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [], "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}`,
			400, "messages[1]: content: an empty array"},
		{"unknown model", `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`, 404, `model "gpt-9" is not declared`},
		{"over the limit", `{"model": "primary", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 5<<10) + `"}]}`, 413, "over the limit of 4096 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", url, clientKey, []byte(tt.body))
			require.Equal(t, tt.want, code, body)
			_, _, _, msg := openAIError(t, body)
			assert.Contains(t, msg, tt.msg)
		})
	}

	t.Run("over the limit without a length", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(`{"model": "primary", "messages": [{"role": "user", "content": "`))
			_, _ = pw.Write(bytes.Repeat([]byte("x"), 8<<10))
			_ = pw.Close()
		}()
		req, _ := http.NewRequest("POST", url, pr)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 413, resp.StatusCode)
	})

	// A compressed body was read as JSON malformed at its first byte; it
	// is refused for what it is, and never decompressed.
	t.Run("compressed body", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write([]byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}]}`))
		require.NoError(t, zw.Close())
		code, _, body := do(t, "POST", url, clientKey, gz.Bytes(), "Content-Encoding", "gzip")
		require.Equal(t, 400, code, body)
		_, _, _, msg := openAIError(t, body)
		assert.Equal(t, `Content-Encoding "gzip": the request body must be sent uncompressed`, msg)
		code, _, body = do(t, "POST", url, clientKey, []byte(`{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`), "Content-Encoding", "identity")
		assert.Equal(t, 404, code, "identity is no encoding: %s", body)
	})

	t.Run("slow body", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"model\":", clientKey)
		start := time.Now()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		assert.Equal(t, 408, resp.StatusCode)
		assert.Less(t, time.Since(start), 3*time.Second)
		_, _ = io.Copy(io.Discard, resp.Body)
		// The connection is not kept for another request.
		_, err = conn.Read(make([]byte, 1))
		assert.Error(t, err)
	})

	t.Run("unknown route", func(t *testing.T) {
		code, _, body := do(t, "POST", g.url+"/v1/completions", clientKey, []byte(`{}`))
		assert.Equal(t, 404, code)
		assert.Contains(t, body, "no route for POST /v1/completions")
		code, _, _ = do(t, "GET", url, clientKey, nil)
		assert.Equal(t, 404, code)
	})
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

func TestMidStreamFailureIsAnErrorEvent(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "error_mid_stream.sse")}},
		[]reply{{body: transcript(t, "anthropic", "error_mid_stream.sse")}})

	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	assert.Equal(t, "The answer is", text.String(), "the deltas before the failure arrive")
	require.Error(t, stream.Err())
	assert.Contains(t, stream.Err().Error(), "mid-stream")
	assert.Equal(t, 1, g.oa.requests(), "a failure after output is never retried")

	as := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	var msg anthropic.Message
	for as.Next() {
		require.NoError(t, msg.Accumulate(as.Current()))
	}
	require.Error(t, as.Err())
	assert.Contains(t, as.Err().Error(), "overloaded_error")
	require.NotEmpty(t, msg.Content)
	assert.NotEmpty(t, msg.Content[0].Text)
	// The handler logs the failure once the client has read the stream's
	// end: on a loaded machine that comes a moment later.
	assert.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "mid-stream") }, 5*time.Second, 5*time.Millisecond,
		"the failure is logged: %s", g.logs.String())
}

// TestClientDisconnectMidStream: the upstream request is cancelled, and the
// call is charged for what was delivered, not for the whole response, on
// every chat route.
func TestClientDisconnectMidStream(t *testing.T) {
	for _, route := range []struct{ path, body, hello string }{
		{"/v1/chat/completions", string(chatBody("primary", "Hello", true)), `"content":"Hello"`},
		{"/v1/responses", `{"model": "primary", "input": "Hello", "stream": true}`, `"delta":"Hello"`},
		{"/v1/messages", string(messagesBody("primary", "Hello", true)), `"text":"Hello"`},
	} {
		t.Run(route.path, func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse"), gate: gate, holdAfter: 4}}, nil)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", g.url+route.path, strings.NewReader(route.body))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				require.NoError(t, err)
				if strings.Contains(line, route.hello) {
					break
				}
			}
			cancel()
			resp.Body.Close()
			select {
			case <-g.oa.gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
			var out float64
			require.Eventually(t, func() bool {
				m := regexp.MustCompile(`agentc_serve_tokens_total\{direction="output",model="primary",tenant="acme"\} (\S+)`).FindStringSubmatch(g.metrics(t))
				if m == nil {
					return false
				}
				out, _ = strconv.ParseFloat(m[1], 64)
				return true
			}, 5*time.Second, 10*time.Millisecond)
			// The upstream would have reported 10 output tokens at the end; the
			// chunks that arrived ("Hello", "!", " How", perhaps the next) are
			// estimated conservatively (runtime.EstimateTokens): 2 to 5.
			assert.GreaterOrEqual(t, out, 1.0)
			assert.LessOrEqual(t, out, 5.0)
			assert.Contains(t, g.metrics(t), `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`)
			assert.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "status=499") }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

// TestStalledUpstreamIsCutAtTheResponseDeadline: the write deadline
// (WriteTimeout) cut a response only at its next write, so an upstream that
// stopped sending, streamed or not, held the request, its upstream call
// and its connection for as long as the client waited. The call is
// cancelled before the deadline, and the client is told: a 504 in the
// route's error format, or a stream's error event (never a stream that
// just stops, which a client could take for a whole answer); the access
// log says 504.
func TestStalledUpstreamIsCutAtTheResponseDeadline(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse"), gate: gate, holdAfter: 4}}, nil,
				func(o *Options) { o.WriteTimeout = 2 * time.Second })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", g.url+"/v1/chat/completions", bytes.NewReader(chatBody("primary", "Hello", stream)))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err, "the client gets an answer")
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err, "the response ends before the write deadline")
			assert.Less(t, time.Since(start), 5*time.Second, "cut at the deadline, not when the client gave up")
			if stream {
				assert.Equal(t, 200, resp.StatusCode)
				assert.Contains(t, string(body), `"error"`)
				assert.Contains(t, string(body), "WriteTimeout")
				assert.NotContains(t, string(body), "[DONE]", "a cut stream does not end as a whole answer")
			} else {
				assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, "%s", body)
				assert.Contains(t, string(body), "WriteTimeout")
				assert.Contains(t, string(body), `"timeout"`)
			}
			select {
			case <-g.oa.gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
			if !stream {
				assert.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "status=504") }, 5*time.Second, 10*time.Millisecond, "%s", g.logs)
			}
			assert.Contains(t, g.logs.String(), "WriteTimeout")
		})
	}
}

// TestNegativeWriteTimeoutIsNoBound: a negative WriteTimeout lifts the
// bound (as a negative WatchInterval turns watching off); it used to set
// every response's deadline in the past, so no answer could be written.
func TestNegativeWriteTimeoutIsNoBound(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil,
		func(o *Options) { o.WriteTimeout = -1 })
	req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(chatBody("primary", "Hello", true)))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(body), "[DONE]")
}

// TestThousandConcurrentStreams holds 1,000 streams open at once: the
// upstream answers none until all have arrived.
func TestThousandConcurrentStreams(t *testing.T) {
	const n = 1000
	text := transcript(t, "openai", "text.sse")
	var arrived atomic.Int64
	all := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			http.Error(w, "not all streams arrived", 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events(text) {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	s, client := streamingGateway(t, up, n)
	var wg sync.WaitGroup
	var ok atomic.Int64
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Go(func() {
			if e := streamHello(client, s.url); e != "" {
				errs <- e
				return
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
		break
	}
	assert.Equal(t, int64(n), ok.Load())
	assert.Equal(t, int64(n), arrived.Load(), "every stream reached the upstream while the others were open")
}

// streamingGateway serves the typical chain in front of up, with a client
// that keeps n connections.
func streamingGateway(t *testing.T, up *httptest.Server, n int) (*served, *http.Client) {
	t.Helper()
	t.Cleanup(up.Close)
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	dir := writePolicy(t, fmt.Sprintf(gatewayPolicy, up.URL, up.URL, sha(clientKey), weatherDecl, typicalChain))
	// A thousand clients dialling at once on a busy machine can take longer
	// than the default five seconds between the accept and the headers; the
	// header timeout has tests of its own.
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, ReadHeaderTimeout: time.Minute})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	t.Cleanup(client.CloseIdleConnections)
	return s, client
}

// streamHello streams a chat completion of "Hello" through the gateway at
// url and returns what is wrong with it: "" for a whole stream, ended once.
func streamHello(client *http.Client, url string) string {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(chatBody("primary", "Hello", true)))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) || bytes.Count(b, []byte("data: [DONE]")) != 1 ||
		!bytes.Contains(b, []byte(`"content":" today"`)) {
		return fmt.Sprintf("status %d, err %v: %.200s", resp.StatusCode, err, b)
	}
	return ""
}

// TestReloadWhileStreaming: a reload that fails leaves the streams and the
// pipeline alone; one that succeeds lets the open stream finish on the old
// pipeline, which closes after it.
func TestReloadWhileStreaming(t *testing.T) {
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	text := transcript(t, "openai", "text.sse")
	g := newGateway(t, typicalChain, []reply{{body: text, gate: gate1, holdAfter: 2}, {body: text}, {body: text, gate: gate2, holdAfter: 2}, {body: text}}, nil,
		func(o *Options) { o.WatchInterval = 20 * time.Millisecond })
	policy := filepath.Join(g.dir, "policy.cue")
	good, err := os.ReadFile(policy)
	require.NoError(t, err)
	old := g.srv.cur.Load()

	open := func() *bufio.Reader {
		req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(chatBody("primary", "Hello", true)))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		require.Equal(t, 200, resp.StatusCode)
		r := bufio.NewReader(resp.Body)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, line, `"content":"Hello"`)
		return r
	}
	rest := func(r *bufio.Reader) string {
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		return string(b)
	}

	r := open()
	require.NoError(t, os.WriteFile(policy, []byte(strings.Replace(string(good), "chains:", "chains: chat: 1\nchains:", 1)), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "reload failed") }, 5*time.Second, 10*time.Millisecond)
	close(gate1)
	assert.Contains(t, rest(r), "data: [DONE]")
	assert.Same(t, old, g.srv.cur.Load())
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "Hello", false))
	assert.Equal(t, 200, code, body)

	r = open()
	require.NoError(t, os.WriteFile(policy, append(good, "\n// reloaded\n"...), 0o644))
	require.Eventually(t, func() bool { return g.srv.cur.Load() != old }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-old.done:
		t.Fatal("the old pipeline closed under an open stream")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate2)
	assert.Contains(t, rest(r), "data: [DONE]")
	select {
	case <-old.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the old pipeline was not closed after its last stream")
	}
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "Hello", false))
	assert.Equal(t, 200, code, body)
}

// TestMeterScopeKeyCapsTheCaller: a request without X-Agentc-Run is a run
// of its own, so a budget of scope "key" is what caps a caller across its
// requests: the second request, a fresh run, is refused.
func TestMeterScopeKeyCapsTheCaller(t *testing.T) {
	ok := reply{body: transcript(t, "openai", "text.sse")}
	g := newGateway(t, `{use: "meter", name: "spend", budget: calls: 1, scope: "key"}`, []reply{ok, ok}, nil)
	url := g.url + "/v1/chat/completions"
	code, h, body := do(t, "POST", url, clientKey, chatBody("primary", "hi", false))
	require.Equal(t, 200, code, body)
	first := h.Get(RunHeader)
	code, h, body = do(t, "POST", url, clientKey, chatBody("primary", "hi", false))
	require.Equal(t, 402, code, body)
	assert.NotEqual(t, first, h.Get(RunHeader), "each request is a run of its own")
	typ, ecode, layer, msg := openAIError(t, body)
	assert.Equal(t, "insufficient_quota", typ)
	assert.Equal(t, "budget", ecode)
	assert.Equal(t, "spend", layer)
	assert.Contains(t, msg, "calls ceiling 1 reached")
}

// TestReloadStormUnderStreams: 200 streams in flight across a storm of 50
// reloads each finish once, on the generation they started on, and every
// generation replaced is closed once its last stream has ended (and not
// before).
func TestReloadStormUnderStreams(t *testing.T) {
	const n = 200
	text := events(transcript(t, "openai", "text.sse"))
	var arrived atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, text[0])
		w.(http.Flusher).Flush()
		<-release
		for _, ev := range text[1:] {
			_, _ = io.WriteString(w, ev)
		}
	}))
	s, client := streamingGateway(t, up, n)
	var wg sync.WaitGroup
	var gens sync.Map
	errs := make(chan string, n)
	stream := func() {
		if e := streamHello(client, s.url); e != "" {
			errs <- e
		}
	}
	for i := 0; i < n; i++ {
		wg.Go(stream)
		if i%4 == 0 {
			wg.Go(func() {
				gens.Store(s.srv.cur.Load(), true)
				assert.NoError(t, s.srv.Reload(context.Background()))
			})
		}
	}
	require.Eventually(t, func() bool { return arrived.Load() == n }, 30*time.Second, 10*time.Millisecond)
	gens.Range(func(g, _ any) bool {
		select {
		case <-g.(*generation).done:
			if g.(*generation).active.Load() > 0 {
				t.Errorf("generation %d closed with %d requests in flight", g.(*generation).n, g.(*generation).active.Load())
			}
		default:
		}
		return true
	})
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	assert.EqualValues(t, n, arrived.Load(), "each stream reached the upstream once")
	cur := s.srv.cur.Load()
	gens.Range(func(g, _ any) bool {
		if g != cur {
			select {
			case <-g.(*generation).done:
			case <-time.After(5 * time.Second):
				t.Errorf("generation %d replaced but not closed", g.(*generation).n)
			}
		}
		return true
	})
	assert.EqualValues(t, 1+n/4, cur.n)
}

// A client may not name its run like the runs the gateway gives requests
// without one: it would join another request's run in flight.
func TestRunIDOfTheGatewayIsRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, "anon-ABCDEF")
	require.Equal(t, 400, code, body)
	typ, _, _, msg := openAIError(t, body)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Contains(t, msg, `X-Agentc-Run may not start with "anon-"`)
}

// X-Agentc-Run repeated with different ids is refused (the gateway does
// not pick the first, a proxy in front may have read another); the same id
// twice is that run.
func TestRunHeaderRepeated(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	post := func(ids ...string) (int, string) {
		req, err := http.NewRequest("POST", g.url+"/v1/chat/completions", bytes.NewReader(chatBody("primary", "hi", false)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		for _, id := range ids {
			req.Header.Add(RunHeader, id)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := post("run-a", "run-b")
	require.Equal(t, 400, code, body)
	_, _, _, msg := openAIError(t, body)
	assert.Contains(t, msg, "X-Agentc-Run is repeated with different ids")
	assert.Zero(t, g.oa.requests())
	code, body = post("run-a", "run-a")
	require.Equal(t, 200, code, body)
}

// What the APIs accept is served: four stop sequences, stream_options
// null on a call that does not stream, and stream_options on a stream.
func TestOpenAIWireBoundsAccepted(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}, {body: transcript(t, "openai", "text.sse")}}, nil)
	url := g.url + "/v1/chat/completions"
	code, _, body := do(t, "POST", url, clientKey, []byte(`{"model": "primary", "stop": ["a", "b", "c", "d"], "stream_options": null,
		"messages": [{"role": "user", "content": "hi"}]}`))
	require.Equal(t, 200, code, body)
	assert.Contains(t, g.oa.body(0), `"stop":["a","b","c","d"]`)
	code, _, body = do(t, "POST", url, clientKey, []byte(`{"model": "primary", "stream": true, "stream_options": {"include_usage": true},
		"messages": [{"role": "user", "content": "hi"}]}`))
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, "[DONE]")
}

// The Anthropic route answers as the Messages API: max_tokens and at least
// one message are required (400 in Anthropic's error body); a conversation
// that opens with an assistant turn, or holds consecutive turns of one
// role, is served (the API takes both and combines consecutive turns) and
// reaches the model as sent.
func TestAnthropicMessageOrder(t *testing.T) {
	replies := func() []reply {
		return []reply{{body: transcript(t, "anthropic", "text.sse")}, {body: transcript(t, "anthropic", "text.sse")}}
	}
	g := newGateway(t, `{use: "tracing"}`, nil, replies())
	url := g.url + "/v1/messages"
	for _, tt := range []struct {
		name, body, msg string
	}{
		{"no max_tokens", `{"model": "backup", "messages": [{"role": "user", "content": "hi"}]}`, "max_tokens: required"},
		{"no messages", `{"model": "backup", "max_tokens": 16, "messages": []}`, "messages: at least one message is required"},
		{"messages null", `{"model": "backup", "max_tokens": 16, "messages": null}`, "messages: at least one message is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", url, "", []byte(tt.body), "x-api-key", clientKey)
			require.Equal(t, 400, code, body)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			assert.Equal(t, "error", e.Type)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			assert.Contains(t, e.Error.Message, tt.msg)
		})
	}
	assert.Zero(t, g.an.requests(), "a refused request reaches no model")

	for i, tt := range []struct {
		name, messages, want string
	}{
		{"assistant first", `[{"role": "assistant", "content": "How can I help?"}, {"role": "user", "content": "hi"}]`,
			`"messages":[{"role":"assistant","content":[{"type":"text","text":"How can I help?"}]},{"role":"user","content":[{"type":"text","text":"hi"}]}]`},
		{"consecutive user turns", `[{"role": "user", "content": "hi"}, {"role": "user", "content": "are you there?"}]`,
			`"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"user","content":[{"type":"text","text":"are you there?"}]}]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", url, "", []byte(`{"model": "backup", "max_tokens": 16, "messages": `+tt.messages+`}`), "x-api-key", clientKey)
			require.Equal(t, 200, code, body)
			require.Equal(t, i+1, g.an.requests())
			assert.Contains(t, g.an.body(i), tt.want)
		})
	}
}

// An upstream the gateway cannot reach is a 502 that says so (the model,
// "connection refused") without the transport's text: the upstream's URL
// and address, and the resolver's, stay in the gateway's log.
func TestUnreachableUpstreamIsNotDescribed(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	dir := writePolicy(t, fmt.Sprintf(gatewayPolicy, "http://"+closed, "http://"+closed, sha(clientKey), weatherDecl, `{use: "tracing"}`))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	for _, tt := range []struct {
		name, path string
		body       []byte
	}{
		{"openai", "/v1/chat/completions", chatBody("primary", "hi", false)},
		{"openai stream", "/v1/chat/completions", chatBody("primary", "hi", true)},
		{"anthropic", "/v1/messages", messagesBody("backup", "hi", false)},
		{"anthropic stream", "/v1/messages", messagesBody("backup", "hi", true)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", s.url+tt.path, clientKey, tt.body)
			require.Equal(t, 502, code, body)
			assert.Contains(t, body, "connection refused")
			assert.Contains(t, body, "the cause is in the gateway's log")
			for _, leak := range []string{closed, "127.0.0.1", "dial tcp", "http://"} {
				assert.NotContains(t, body, leak)
			}
		})
	}
	assert.Contains(t, s.logs.String(), closed, "the log has the whole error")
}

// Nor may it name the run of an MCP session: the session, and its run,
// belong to the key that opened it.
func TestRunIDOfAnMCPSessionIsRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, "mcp-ABCDEF")
	require.Equal(t, 400, code, body)
	typ, _, _, msg := openAIError(t, body)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Contains(t, msg, `X-Agentc-Run may not start with "mcp-"`)
}

// TestUpstreamRefusingTheGatewayIsNotDescribed: an upstream that refuses
// the gateway itself (its key: 401; its account's credit: 402; its
// project's permissions: 403) wrote why in its error's text, and the
// client read it whole: the provider's hint of the gateway's key ("sk-upst
// ****4b1d"), its project's id, its credit. The client now learns that the
// upstream refused the gateway's credentials, and its status; the
// access log keeps the upstream's text.
func TestUpstreamRefusingTheGatewayIsNotDescribed(t *testing.T) {
	hint := openAIKey[:7] + "*********" + openAIKey[len(openAIKey)-4:]
	oa401 := `{"error":{"message":"Incorrect API key provided: ` + hint + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	oa403 := `{"error":{"message":"Project proj_Q7wT2ce9Zr does not have access to model gpt-4.1-mini","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	for _, tt := range []struct {
		name   string
		oa, an []reply
		status int
		leak   string
	}{
		{"openai key", []reply{{status: 401, body: oa401}}, nil, 401, hint},
		{"openai project", []reply{{status: 403, body: oa403}}, nil, 403, "proj_Q7wT2ce9Zr"},
		{"anthropic key", nil, []reply{{status: 401, body: transcript(t, "anthropic", "401.json")}}, 401, "invalid x-api-key"},
		{"anthropic credit", nil, []reply{{status: 402, body: transcript(t, "anthropic", "402_billing.json")}}, 402, "credit balance"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tt.name, stream), func(t *testing.T) {
				g := newGateway(t, `{use: "tracing"}`, tt.oa, tt.an)
				var err error
				if tt.oa != nil {
					params := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}
					if stream {
						s := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
						for s.Next() {
						}
						err = s.Err()
					} else {
						_, err = g.openai(t).Chat.Completions.New(context.Background(), params)
					}
				} else {
					params := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
						Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}}
					if stream {
						s := g.anthropic(t).Messages.NewStreaming(context.Background(), params)
						for s.Next() {
						}
						err = s.Err()
					} else {
						_, err = g.anthropic(t).Messages.New(context.Background(), params)
					}
				}
				require.Error(t, err)
				msg := err.Error()
				if oe := (*openai.Error)(nil); errors.As(err, &oe) {
					msg = fmt.Sprintf("%d %s", oe.StatusCode, oe.Message)
				}
				assert.Contains(t, msg, "502", "the gateway's failure, not the caller's")
				assert.Contains(t, msg, "refused the gateway's credentials")
				assert.Contains(t, msg, fmt.Sprintf("%d %s", tt.status, http.StatusText(tt.status)))
				assert.Contains(t, msg, "the cause is in the gateway's log")
				assert.NotContains(t, msg, tt.leak)
				assert.Contains(t, g.logs.String(), tt.leak, "the log has the whole error")
			})
		}
	}
}

// A run id is printable ASCII without spaces: a space, which is printable,
// is refused with a message that says so.
func TestRunIDWithASpaceIsRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, "run 1")
	require.Equal(t, 400, code, body)
	_, _, _, msg := openAIError(t, body)
	assert.Contains(t, msg, "X-Agentc-Run holds a space")
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, "run\u00e9")
	require.Equal(t, 400, code, body)
	_, _, _, msg = openAIError(t, body)
	assert.Contains(t, msg, "not printable ASCII")
}

// TestMisspeltFieldIsNamed: a body whose required field is misspelt
// (mesages, modle) was refused as if the field were missing ("messages: at
// least one message is required"), which sends the client looking for a
// field it wrote; the misspelt field is named, on every chat route.
func TestMisspeltFieldIsNamed(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	for _, tt := range []struct {
		route, body, want string
	}{
		{"/v1/chat/completions", `{"model": "primary", "mesages": [{"role": "user", "content": "hi"}]}`, "mesages: not carried"},
		{"/v1/chat/completions", `{"modle": "primary", "messages": [{"role": "user", "content": "hi"}]}`, "modle: not carried"},
		{"/v1/messages", `{"model": "primary", "max_tokens": 10, "mesages": [{"role": "user", "content": "hi"}]}`, "mesages: not carried"},
		{"/v1/messages", `{"model": "primary", "max_token": 10, "messages": [{"role": "user", "content": "hi"}]}`, "max_token: not carried"},
		{"/v1/messages/count_tokens", `{"modle": "primary", "messages": [{"role": "user", "content": "hi"}]}`, "modle: not carried"},
		{"/v1/responses", `{"modle": "primary", "input": "hi"}`, "modle: not carried"},
	} {
		t.Run(tt.route+" "+tt.want, func(t *testing.T) {
			code, _, body := do(t, "POST", g.url+tt.route, clientKey, []byte(tt.body))
			require.Equal(t, 400, code, body)
			assert.Contains(t, body, tt.want)
		})
	}
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

// TestBodyNotAnObject: a body that is JSON but not an object (an array, a
// string) is a 400 in the route's format saying the body must be a JSON
// object, and a field of the wrong JSON type names the type wanted in
// JSON's terms: no Go type of the gateway's reaches the client.
func TestBodyNotAnObject(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"} {
		for _, body := range []string{`[{"model": "primary"}]`, `"hi"`, `42`} {
			code, _, resp := do(t, "POST", g.url+path, clientKey, []byte(body), "anthropic-version", "2023-06-01")
			require.Equal(t, http.StatusBadRequest, code, path+" "+resp)
			assert.Contains(t, resp, "the body must be a JSON object", path)
			assert.NotContains(t, resp, "serve.", path)
		}
	}
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "messages": {"role": "user"}}`))
	requireInvalidRequest(t, code, resp, "messages: want an array, got JSON object")
	assert.NotContains(t, resp, "serve.")
	code, _, resp = do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "primary", "messages": [7]}`))
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.NotContains(t, resp, "serve.")
}
