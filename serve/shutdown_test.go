package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownCutEndsStreamsWithAnErrorEvent: a stream still open at the
// end of the grace period was cut by closing its connection, so its client
// read a truncated body (an unexpected EOF) and could not tell a shutdown
// from a network fault. The requests are now cancelled first and each ends
// as a failure does: a stream under way with an error event naming the
// shutdown, a call not yet answered with a 503 and Retry-After, which the
// SDKs read and may retry on another replica.
func TestShutdownCutEndsStreamsWithAnErrorEvent(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	held := func(provider string, after int) reply {
		return reply{body: transcript(t, provider, "text.sse"), gate: gate, holdAfter: after}
	}
	// Each reply holds after its first text delta.
	g := newGateway(t, typicalChain, []reply{held("openai", 2), held("openai", 2)}, []reply{held("anthropic", 4)},
		func(o *Options) { o.ShutdownTimeout = 300 * time.Millisecond })

	oa := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
	require.True(t, oa.Next(), "%v", oa.Err())
	an := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))}})
	require.True(t, an.Next(), "%v", an.Err())
	whole := make(chan error, 1)
	go func() {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
		whole <- err
	}()
	require.Eventually(t, func() bool { return g.oa.requests() == 2 }, 5*time.Second, 5*time.Millisecond)

	stopped := make(chan error, 1)
	go func() { stopped <- g.stop() }()

	for oa.Next() {
	}
	require.Error(t, oa.Err(), "the OpenAI stream ends with an error, not a truncated body")
	assert.Contains(t, oa.Err().Error(), "shutting down")
	assert.NotContains(t, oa.Err().Error(), "EOF")

	for an.Next() {
	}
	require.Error(t, an.Err(), "the Anthropic stream ends with an error event")
	assert.Contains(t, an.Err().Error(), "shutting down")
	var ae *anthropic.Error
	require.True(t, errors.As(an.Err(), &ae) || strings.Contains(an.Err().Error(), "overloaded_error"), "%v", an.Err())

	err := <-whole
	var oe *openai.Error
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.Equal(t, http.StatusServiceUnavailable, oe.StatusCode)
	assert.Contains(t, oe.Message, "shutting down")
	assert.Equal(t, "1", oe.Response.Header.Get("Retry-After"))

	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	logs := g.logs.String()
	assert.Contains(t, logs, "status=503")
	assert.Contains(t, logs, "shutting down")
}

// TestShutdownCutAnswersMCPCalls: a tools/call still running at the end of
// the grace period was cancelled, but the MCP handler ended with its HTTP
// request, so its client read a 200 event stream holding no answer
// ("request terminated without response") and would send the call again,
// though a side-effecting tool may have acted; the access log said 503,
// which was not sent. The call is now answered before its connection
// closes: in doubt for a side-effecting tool (not to be sent again), the
// shutdown's retryable refusal for a retry_safe one, and the access log
// records the 200 stream that carried the answer.
func TestShutdownCutAnswersMCPCalls(t *testing.T) {
	for _, tc := range []struct {
		name, decl string
		want       []string
		notWant    string
	}{
		{"side_effecting", "side_effecting: true",
			[]string{"may have made its effect", "shutting down", "in doubt, do not send it again"}, "retry the request"},
		{"retry_safe", "{side_effecting: true, retry_safe: true}",
			[]string{"shutting down and the grace period for requests in flight is over; retry the request"}, "may have made its effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upstream, started, _ := hangingUpstream(t)
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: slow: url: %q
tools: hang: %s
`, sha("agent-key"), upstream, tc.decl))), ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
			// A client as the SDK makes it by default: one that gives up its
			// session as soon as the event stream ends (MaxRetries -1) may
			// read the end of the stream, which follows the answer, first.
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key: "agent-key"}}}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cs.Close() })

			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			answered := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang"})
				answered <- answer{res, err}
			}()
			<-started
			require.NoError(t, s.stop())

			a := <-answered
			require.NoError(t, a.err, "the call cut by the shutdown is answered")
			require.True(t, a.res.IsError)
			msg := text(t, a.res)
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
			assert.NotContains(t, msg, tc.notWant)

			var call string
			for _, line := range strings.Split(s.logs.String(), "\n") {
				if strings.Contains(line, "msg=request method=POST path=/mcp") {
					call = line // the tools/call is the last POST answered
				}
			}
			assert.Contains(t, call, "status=200", "the access log records the stream that carried the answer")
			assert.NotContains(t, call, "bytes=0 ")
		})
	}
}

// holdingDeletes serves srv over streamable HTTP until the test ends, but
// holds each DELETE (a session's end: the gateway's close of it waits)
// until release is closed, which it is when the test ends, after sending
// on deleting.
func holdingDeletes(t *testing.T, srv *mcp.Server, deleting, release chan struct{}) *httptest.Server {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deleting <- struct{}{}
			<-release
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	return ts
}

// awaitBeforeStillClosing holds the end of the wait after the shutdown
// cut, before Serve names what is still closing, until ch is sent on.
func awaitBeforeStillClosing(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	beforeStillClosing = func() { <-ch }
	t.Cleanup(func() { beforeStillClosing = nil })
}

// TestShutdownCutNamesWhatStillCloses: when what outlasted the wait after
// the cut was not a request but the closing of an MCP upstream session (its
// server slow to let go: the cancellations of its calls, its process's
// exit, its DELETE), the error said "requests still running ... running=0".
// It now names the upstream sessions still closing.
func TestShutdownCutNamesWhatStillCloses(t *testing.T) {
	started, deleting, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	ts := holdingDeletes(t, srv, deleting, release)

	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: slow: url: %q
`, ts.URL))), ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	go func() { _, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang"}) }()
	<-started
	// The generation closes on a goroutine of its own once the call has
	// let go of it: the end of the wait after the cut is held until its
	// session's DELETE is sent, so that the log names the session, not
	// the pipeline it closes first.
	awaitBeforeStillClosing(t, deleting)
	require.NoError(t, s.stop())

	logs := s.logs.String()
	assert.NotContains(t, logs, "requests still running")
	assert.Contains(t, logs, `msg="mcp upstream sessions still closing after the shutdown cut; returning without waiting for them" servers=[slow]`)
}

// TestShutdownCutDoesNotCloseARetiredGenerationInline: a request to /mcp
// still open at the cut, holding a generation a reload had retired, let go
// of it at the hang-up, and as its last holder closed it there: its MCP
// upstream sessions, each waiting for its DELETE to be answered, held the
// shutdown before it closed the connections, and Serve never returned. The
// hang-up now only cancels; the generation closes apart, and what is still
// closing at the end of the wait after the cut is logged as it is for the
// last generation.
func TestShutdownCutDoesNotCloseARetiredGenerationInline(t *testing.T) {
	deleting, release := make(chan struct{}, 4), make(chan struct{})
	srvA := mcp.NewServer(&mcp.Implementation{Name: "a", Version: "1"}, nil)
	mcp.AddTool(srvA, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	tsA := holdingDeletes(t, srvA, deleting, release)
	tsB := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srvA }, nil))
	t.Cleanup(tsB.Close)

	dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: url: %q\n", tsA.URL))
	s := startServer(t, Options{Source: cueSource(dir), ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
	gen1 := s.srv.cur.Load()

	// A POST whose body stalls after its headers: its handler holds gen1.
	host := strings.TrimPrefix(s.url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200\r\n\r\n{\"jsonrpc\":", host)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gen1.active.Load() == 1 }, 5*time.Second, time.Millisecond)

	// A reload to another upstream retires gen1, still held by the POST.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), fmt.Appendf(nil, "package gw\n\nmcp: servers: up: url: %q\n", tsB.URL), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	require.NotSame(t, gen1, s.srv.cur.Load())
	require.True(t, gen1.retired.Load())

	// gen1, let go of at the hang-up, closes on a goroutine of its own:
	// what it is closing when the wait after the cut ends (its pipeline,
	// or already its session, whose DELETE is held) depends on how far
	// that goroutine got. The end of the wait is held until the DELETE
	// is sent, so that the log names the session.
	awaitBeforeStillClosing(t, deleting)

	// Serve returns a second after the cut (cutWait), gen1's DELETE
	// unanswered: not once its session's close gives up on it (5 s).
	start := time.Now()
	require.NoError(t, s.stop())
	assert.Less(t, time.Since(start), 4*time.Second, "Serve waited for the retired generation to close")
	// The connection held open is closed.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	require.NoError(t, err, "the connection is closed, not left open")
	logs := s.logs.String()
	assert.NotContains(t, logs, "requests still running")
	assert.Contains(t, logs, `msg="mcp upstream sessions still closing after the shutdown cut; returning without waiting for them" servers=[up]`)
}
