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
			srv := inProcess(b, `{use: "tracing"}`)
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
	assert.Less(t, alloc, uint64(128<<20), "a 4 MiB body of %d text parts allocated %d MB", n, alloc>>20)
}
