package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// manyMessages is a chat body of n empty user messages, in the format of
// the route ("openai" or "anthropic").
func manyMessages(format string, n int) []byte {
	var b bytes.Buffer
	msg := `{"role":"user","content":""}`
	if format == "anthropic" {
		b.WriteString(`{"model":"primary","max_tokens":16,"messages":[`)
	} else {
		b.WriteString(`{"model":"primary","messages":[`)
	}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(msg)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// inProcess is a server of gatewayPolicy with chain, its models answering
// from memory, served without a network.
func inProcess(tb testing.TB, chain string, opts ...func(*Options)) *Server {
	tb.Helper()
	tb.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	tb.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	dir := tb.TempDir()
	if err := os.WriteFile(dir+"/policy.cue", []byte(fmt.Sprintf(gatewayPolicy, "http://127.0.0.1:9", "http://127.0.0.1:9", sha(clientKey), weatherDecl, chain)), 0o644); err != nil {
		tb.Fatal(err)
	}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "ok"})
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
		return nil
	})
	o := Options{Source: cueSource(dir), WatchInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": model, "backup": model}, nil
		}}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(context.Background(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}

// post sends body to path of srv in process and returns the status and
// the response body.
func post(srv *Server, path string, body []byte) (int, string) {
	req, _ := http.NewRequest("POST", path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	w := &recordingWriter{h: http.Header{}}
	srv.ServeHTTP(w, req)
	return w.code, w.b.String()
}

// recordingWriter is a response writer that keeps the status and body.
type recordingWriter struct {
	h    http.Header
	code int
	b    bytes.Buffer
}

func (w *recordingWriter) Header() http.Header { return w.h }
func (w *recordingWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
}
func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.b.Write(b)
}
func (w *recordingWriter) FlushError() error { return nil }

// BenchmarkManyMessages decodes and serves a 4 MiB body of empty messages
// through each chat route.
//
//	go test ./serve/ -run X -bench ManyMessages -benchmem -memprofile /tmp/mem.out
func BenchmarkManyMessages(b *testing.B) {
	for _, rt := range []struct{ format, path string }{{"openai", "/v1/chat/completions"}, {"anthropic", "/v1/messages"}} {
		b.Run(rt.format, func(b *testing.B) {
			srv := inProcess(b, `{use: "tracing"}`, func(o *Options) { o.MaxMessages = -1 })
			body := manyMessages(rt.format, (4<<20-64)/29)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for range b.N {
				code, resp := post(srv, rt.path, body)
				if code != http.StatusOK {
					b.Fatalf("%d %s", code, resp)
				}
			}
		})
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTextPartsDecodedInLinearTime: the adjacent text parts of an OpenAI
// message, when they were joined into one text, were joined by appending
// each to the text so far, copying it at every part: a 4 MiB body of
// 160,000 short text parts in one message allocated 13 GB and took seconds
// of CPU. They are now kept as parts, in a slice sized once.
func TestTextPartsDecodedInLinearTime(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":[`)
	n := 0
	for ; b.Len() < 4<<20-64; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":"a"}`)
	}
	b.WriteString(`]}]}`)
	var p chatParams
	var err error
	alloc := allocated(func() { err = decodeOpenAI(b.Bytes(), &p) })
	require.NoError(t, err)
	require.Len(t, p.req.Messages, 1)
	require.Len(t, p.req.Messages[0].Parts, n)
	assert.Equal(t, strings.Repeat("a\n", n-1)+"a", p.req.Messages[0].Text())
	assert.Less(t, alloc, uint64(96<<20), "a 4 MiB body of %d text parts allocated %d MB", n, alloc>>20)
}

// TestManyMessagesDecodedWithoutCopies: a 4 MiB body of 144,000 empty
// messages allocated 151 MB on the OpenAI route (100 MB on Anthropic's),
// 36 times its size: the decoding grew the messages' slice one copy at a
// time and decoded each message's text with a decoder of its own. The
// slices are now sized from a count of the body's messages, and a text
// without escapes is taken as it is.
func TestManyMessagesDecodedWithoutCopies(t *testing.T) {
	for _, rt := range []struct{ format, path string }{{"openai", "/v1/chat/completions"}, {"anthropic", "/v1/messages"}} {
		srv := inProcess(t, `{use: "tracing"}`, func(o *Options) { o.MaxMessages, o.MaxParts = -1, -1 })
		body := manyMessages(rt.format, (4<<20-64)/29)
		post(srv, rt.path, body) // the first call warms the pools
		var code int
		var resp string
		alloc := allocated(func() { code, resp = post(srv, rt.path, body) })
		require.Equal(t, http.StatusOK, code, resp)
		assert.Less(t, alloc, uint64(12*len(body)), "%s: a body of %d bytes allocated %d MB", rt.format, len(body), alloc>>20)
	}
}

// TestMessageAndPartLimits: a request over MaxMessages or MaxParts is a
// 400 in the route's format naming the limit, refused before its body is
// decoded.
func TestMessageAndPartLimits(t *testing.T) {
	srv := inProcess(t, `{use: "tracing"}`)
	body := manyMessages("openai", DefaultMaxMessages+1)
	var code int
	var resp string
	alloc := allocated(func() { code, resp = post(srv, "/v1/chat/completions", body) })
	assert.Equal(t, http.StatusBadRequest, code)
	assert.JSONEq(t, `{"error": {"message": "messages: 100001 messages, over the limit of 100000 per request",
		"type": "invalid_request_error", "code": "bad_request", "kind": "bad_request", "param": null}}`, resp)
	assert.Less(t, alloc, uint64(2*len(body)), "refused before it is decoded")

	code, resp = post(srv, "/v1/messages", manyMessages("anthropic", DefaultMaxMessages+1))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.JSONEq(t, `{"type": "error", "error": {"type": "invalid_request_error", "code": "bad_request", "kind": "bad_request",
		"message": "messages: 100001 messages, over the limit of 100000 per request"}}`, resp)
	code, resp = post(srv, "/v1/messages/count_tokens", manyMessages("anthropic", DefaultMaxMessages+1))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "over the limit of 100000 per request")
	code, resp = post(srv, "/v1/messages", manyMessages("anthropic", DefaultMaxMessages))
	assert.Equal(t, http.StatusOK, code, resp)

	// Parts: in content, tool calls, a tool result's blocks, the system
	// prompt's blocks.
	srv = inProcess(t, `{use: "tracing"}`, func(o *Options) { o.MaxParts = 6 })
	ok := `{"model":"primary","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"sunny"}]},
		{"role":"user","content":[{"type":"text","text":"c"},{"type":"text","text":"d"}]}]}`
	code, resp = post(srv, "/v1/chat/completions", []byte(ok))
	assert.Equal(t, http.StatusOK, code, resp)
	over := strings.Replace(ok, `"text":"d"}`, `"text":"d"},{"type":"text","text":"e"}`, 1)
	code, resp = post(srv, "/v1/chat/completions", []byte(over))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "messages: 7 content parts, blocks and tool calls, over the limit of 6 per request")
	an := `{"model":"primary","max_tokens":16,"system":[{"type":"text","text":"s"}],"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"location":"x"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}]}`
	code, resp = post(srv, "/v1/messages", []byte(an))
	assert.Equal(t, http.StatusOK, code, resp)
	code, resp = post(srv, "/v1/messages", []byte(strings.Replace(an, `"text":"c"}`, `"text":"c"},{"type":"text","text":"d"}`, 1)))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "7 content parts, blocks and tool calls, over the limit of 6")

	// A malformed body is reported as such, at its position, whatever it
	// holds.
	code, resp = post(srv, "/v1/chat/completions", []byte(over[:len(over)-2]))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "malformed JSON")
}

// gatedModels is a model that answers once gate is closed, counting the
// calls it holds.
func gatedModels(gate chan struct{}, held *atomic.Int64) func(*Options) {
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		held.Add(1)
		defer held.Add(-1)
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		yield(runtime.Delta{Text: "ok"})
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
		return nil
	})
	return func(o *Options) {
		o.Models = func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": model, "backup": model}, nil
		}
	}
}

// assertOverloaded posts the chat body and asserts it is refused with a
// 503 overloaded, Retry-After: 1 and the message msg.
func assertOverloaded(t *testing.T, srv *Server, body []byte, msg string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.JSONEq(t, `{"error": {"message": "`+msg+`", "type": "server_error", "code": "overloaded", "kind": "overloaded", "param": null}}`, rec.Body.String())
}

// TestInFlightLimit: with MaxInFlight requests held by a slow upstream,
// one more chat, count or MCP call is refused at once, a 503 with
// Retry-After in its route's format, not queued; the probes, the metrics
// and the models answer; once a call ends the next one is served.
func TestInFlightLimit(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int64
	const n = 3
	srv := inProcess(t, `{use: "tracing"}`, gatedModels(gate, &held), func(o *Options) { o.MaxInFlight = n })
	chat := []byte(`{"model":"primary","messages":[{"role":"user","content":"hi"}]}`)
	results := make(chan int, n)
	for range n {
		go func() {
			code, _ := post(srv, "/v1/chat/completions", chat)
			results <- code
		}()
	}
	require.Eventually(t, func() bool { return held.Load() == n }, 10*time.Second, time.Millisecond)

	assertOverloaded(t, srv, chat, "the gateway is serving its limit of 3 requests at once; retry the request")

	code, resp := post(srv, "/v1/messages", []byte(`{"model":"primary","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.JSONEq(t, `{"type": "error", "error": {"type": "overloaded_error", "code": "overloaded", "kind": "overloaded",
		"message": "the gateway is serving its limit of 3 requests at once; retry the request"}}`, resp)
	code, _ = post(srv, "/v1/messages/count_tokens", []byte(`{"model":"primary","messages":[{"role":"user","content":"hi"}]}`))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, resp = post(srv, "/mcp", []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, resp, `"code":"overloaded"`)

	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/models"} {
		req, _ := http.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, path)
	}
	assert.Equal(t, int64(n), held.Load(), "nothing was queued behind the calls held")

	close(gate)
	for range n {
		assert.Equal(t, http.StatusOK, <-results)
	}
	code, resp = post(srv, "/v1/chat/completions", chat)
	assert.Equal(t, http.StatusOK, code, resp)
}

// TestMemoryBoundedUnderManyLargeRequests: 32 concurrent requests of
// 99,000 messages (4 MiB bodies, each decoding to some 40 MB) against a
// slow upstream hold no more than MaxInFlight of them decoded: the heap
// stays within a few of them, and returns to where it was once they end.
func TestMemoryBoundedUnderManyLargeRequests(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int64
	const slots, clients = 4, 32
	srv := inProcess(t, `{use: "tracing"}`, gatedModels(gate, &held), func(o *Options) { o.MaxInFlight = slots })
	body := manyMessages("openai", 99_000)
	heap := func() uint64 {
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	codes := make(chan int, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			code, _ := post(srv, "/v1/chat/completions", body)
			codes <- code
		})
	}
	require.Eventually(t, func() bool { return held.Load() == slots && len(codes) == clients-slots }, 30*time.Second, time.Millisecond)
	during := heap()
	close(gate)
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: slots, http.StatusServiceUnavailable: clients - slots}, count)
	after := heap()
	t.Logf("heap: %d MB before, %d MB with %d requests held, %d MB after", before>>20, during>>20, slots, after>>20)
	assert.Less(t, during, before+slots*64<<20, "the heap holds at most the requests in flight")
	assert.Less(t, after, before+16<<20, "nothing is kept once they end")
}

// chatOf returns a chat request body of about size bytes.
func chatOf(size int) []byte {
	return []byte(`{"model":"primary","messages":[{"role":"user","content":"` + strings.Repeat("a", size) + `"}]}`)
}

// chunkedRequest is a request whose body has no Content-Length, as a
// chunked one arrives.
func chunkedRequest(ctx context.Context, path string, body []byte) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "POST", path, io.NopCloser(bytes.NewReader(body)))
	req.ContentLength = -1
	return req
}

// serveAsync serves req in the background and returns its status.
func serveAsync(srv *Server, req *http.Request) <-chan int {
	req.Header.Set("Authorization", "Bearer "+clientKey)
	code := make(chan int, 1)
	go func() {
		w := &recordingWriter{h: http.Header{}}
		srv.ServeHTTP(w, req)
		code <- w.code
	}()
	return code
}

// TestInFlightBytesLimit: with large requests holding MaxInFlightBytes of
// bodies against a slow upstream, one more large chat, chunked chat or MCP
// call is refused at once, a 503 with Retry-After, while a small one is
// still served; once they end the budget is whole again.
func TestInFlightBytesLimit(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int64
	const budget = 64 << 10
	srv := inProcess(t, `{use: "tracing"}`, gatedModels(gate, &held), func(o *Options) {
		o.MaxInFlightBytes = budget
		o.MaxBodyBytes = budget
	})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	large := chatOf(30 << 10)
	var results []<-chan int
	for range 2 {
		req, _ := http.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(large))
		results = append(results, serveAsync(srv, req))
	}
	require.Eventually(t, func() bool { return held.Load() == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 2*int64(len(large)), srv.bodyBytes.Load())

	assertOverloaded(t, srv, large, "the gateway is holding its limit of 65536 bytes of request bodies at once; retry the request")

	for _, path := range []string{"/v1/chat/completions", "/mcp"} {
		body := large
		if path == "/mcp" {
			body = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("a", 30<<10) + `"}}`)
		}
		// Chunked: charged as it is read.
		req := chunkedRequest(context.Background(), path, body)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, path)
		assert.Equal(t, "1", rec.Header().Get("Retry-After"), path)
		assert.Contains(t, rec.Body.String(), "bytes of request bodies at once", path)
	}
	assert.Equal(t, 2*int64(len(large)), srv.bodyBytes.Load(), "a refused body is not kept charged")

	small, _ := http.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(chatOf(10)))
	results = append(results, serveAsync(srv, small))
	results = append(results, serveAsync(srv, chunkedRequest(context.Background(), "/v1/chat/completions", chatOf(10))))
	require.Eventually(t, func() bool { return held.Load() == 4 }, 10*time.Second, time.Millisecond, "the small calls are served")

	open()
	for _, r := range results {
		assert.Equal(t, http.StatusOK, <-r)
	}
	assert.Zero(t, srv.bodyBytes.Load())
	code, resp := post(srv, "/v1/chat/completions", large)
	assert.Equal(t, http.StatusOK, code, resp)
	assert.Zero(t, srv.bodyBytes.Load())
}

// panickingWriter panics when the response is written.
type panickingWriter struct{ recordingWriter }

func (w *panickingWriter) WriteHeader(int) { panic("writing the response") }

// TestInFlightBytesReturned: the bytes a request charged are returned
// however it ends: refused (a malformed body, one over MaxBodyBytes, one
// whose chunked body is over it), cut by its client, or a panic.
func TestInFlightBytesReturned(t *testing.T) {
	gate := make(chan struct{})
	var held atomic.Int64
	srv := inProcess(t, `{use: "tracing"}`, gatedModels(gate, &held), func(o *Options) {
		o.MaxInFlightBytes = 64 << 10
		o.MaxBodyBytes = 16 << 10
	})
	t.Cleanup(func() { close(gate) })
	code, _ := post(srv, "/v1/chat/completions", []byte(`{"model":`+strings.Repeat(" ", 1000)))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Zero(t, srv.bodyBytes.Load())
	code, _ = post(srv, "/v1/chat/completions", chatOf(20<<10))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Zero(t, srv.bodyBytes.Load())
	assert.Equal(t, http.StatusRequestEntityTooLarge, <-serveAsync(srv, chunkedRequest(context.Background(), "/v1/chat/completions", chatOf(20<<10))))
	assert.Zero(t, srv.bodyBytes.Load())

	// Cut by its client while its call is held.
	ctx, cancel := context.WithCancel(context.Background())
	cut := serveAsync(srv, chunkedRequest(ctx, "/v1/chat/completions", chatOf(10<<10)))
	require.Eventually(t, func() bool { return held.Load() == 1 }, 10*time.Second, time.Millisecond)
	assert.Greater(t, srv.bodyBytes.Load(), int64(10<<10))
	cancel()
	<-cut
	assert.Zero(t, srv.bodyBytes.Load())

	// A panic while it is answered.
	req, _ := http.NewRequest("POST", "/v1/chat/completions", bytes.NewReader([]byte(`{`)))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	assert.Panics(t, func() { srv.ServeHTTP(&panickingWriter{recordingWriter{h: http.Header{}}}, req) })
	assert.Zero(t, srv.bodyBytes.Load())
}

// inFlightGauges returns the values of the gauges of the calls and the
// request-body bytes in flight on srv's /metrics.
func inFlightGauges(t *testing.T, srv *Server) (calls, bytes string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "/metrics", nil)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "agentc_serve_calls_in_flight "); ok {
			calls = v
		}
		if v, ok := strings.CutPrefix(line, "agentc_serve_request_body_bytes_in_flight "); ok {
			bytes = v
		}
	}
	return calls, bytes
}

// TestInFlightGauges: the calls in flight and the bytes of their bodies,
// which MaxInFlight and MaxInFlightBytes bound, had no metric, so an
// operator could not see how near the limits the gateway runs. Both are
// gauges now, the bytes counted with a chunked body too and without a
// bound; they are back at zero once the calls end.
func TestInFlightGauges(t *testing.T) {
	for name, limit := range map[string]int64{"bounded": 4 << 20, "no bound": -1} {
		t.Run(name, func(t *testing.T) {
			gate := make(chan struct{})
			var held atomic.Int64
			srv := inProcess(t, `{use: "tracing"}`, gatedModels(gate, &held), func(o *Options) { o.MaxInFlightBytes = limit })
			open := sync.OnceFunc(func() { close(gate) })
			t.Cleanup(open)
			calls, bytes := inFlightGauges(t, srv)
			assert.Equal(t, "0", calls)
			assert.Equal(t, "0", bytes)

			body := chatOf(1000)
			req, _ := http.NewRequest("POST", "/v1/chat/completions", strings.NewReader(string(body)))
			results := []<-chan int{serveAsync(srv, req),
				serveAsync(srv, chunkedRequest(context.Background(), "/v1/chat/completions", body))}
			require.Eventually(t, func() bool { return held.Load() == 2 }, 10*time.Second, time.Millisecond)
			calls, bytes = inFlightGauges(t, srv)
			assert.Equal(t, "2", calls)
			assert.Equal(t, fmt.Sprint(2*len(body)), bytes)

			open()
			for _, r := range results {
				assert.Equal(t, http.StatusOK, <-r)
			}
			calls, bytes = inFlightGauges(t, srv)
			assert.Equal(t, "0", calls)
			assert.Equal(t, "0", bytes)
		})
	}
}

// TestNewRefusesInFlightBytesBelowBodyLimit: MaxInFlightBytes below
// MaxBodyBytes, which never serves a body at the limit, was refused by the
// command's flags only; a host passing the options got a server that
// answered such bodies 503 forever. New refuses it.
func TestNewRefusesInFlightBytesBelowBodyLimit(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")),
		MaxBodyBytes: 2048, MaxInFlightBytes: 1024})
	require.Error(t, err)
	assert.Equal(t, "serve: -maxinflightbytes (Options.MaxInFlightBytes, 1024) must be at least -maxbody (Options.MaxBodyBytes, 2048), or a body at the limit is never served", err.Error())
	var oe *OptionsError
	assert.ErrorAs(t, err, &oe, "an option's error, not the policy's")
	_, err = New(context.Background(), Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")),
		MaxInFlightBytes: 1 << 20})
	require.Error(t, err, "against the default MaxBodyBytes (4 MiB)")
	assert.Contains(t, err.Error(), "MaxBodyBytes, 4194304)")
}
