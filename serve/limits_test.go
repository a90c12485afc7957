package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

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

// TestTextPartsJoinedInLinearTime: the adjacent text parts of an OpenAI
// message, which are joined into one text, were joined by appending each
// to the text so far, copying it at every part: a 4 MiB body of 160,000
// empty text parts in one message allocated 13 GB and took seconds of
// CPU. The texts are now joined once.
func TestTextPartsJoinedInLinearTime(t *testing.T) {
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
	assert.Equal(t, strings.Repeat("a\n", n-1)+"a", p.req.Messages[0].Content)
	assert.Less(t, alloc, uint64(24<<20), "a 4 MiB body of %d text parts allocated %d MB", n, alloc>>20)
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
		"type": "invalid_request_error", "code": "bad_request", "param": null}}`, resp)
	assert.Less(t, alloc, uint64(2*len(body)), "refused before it is decoded")

	code, resp = post(srv, "/v1/messages", manyMessages("anthropic", DefaultMaxMessages+1))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.JSONEq(t, `{"type": "error", "error": {"type": "invalid_request_error", "code": "bad_request",
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
