package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			// The session's end is held: the gateway's close of it waits.
			deleting <- struct{}{}
			<-release
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })

	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: slow: url: %q
`, ts.URL))), ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	go func() { _, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang"}) }()
	<-started
	require.NoError(t, s.stop())
	<-deleting

	logs := s.logs.String()
	assert.NotContains(t, logs, "requests still running")
	assert.Contains(t, logs, `msg="mcp upstream sessions still closing after the shutdown cut; returning without waiting for them" servers=[slow]`)
}
