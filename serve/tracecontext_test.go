package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A caller's W3C trace context, as its traceparent and tracestate.
const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerParent = "00-" + callerTrace + "-" + callerSpan + "-01"
	callerState  = "vendor=opaque,other=1"
)

// tracedGateway is newGateway with a tracing layer whose spans go to the
// returned recorder.
func tracedGateway(t *testing.T, chain string, oa, an []reply, opts ...func(*Options)) (*gateway, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return newGateway(t, chain, oa, an, append(opts, func(o *Options) { o.Deps.TracerProvider = tp })...), rec
}

// The spans of a call whose request carries a traceparent join the
// caller's trace, as children of its span, its tracestate kept; the
// provider's request carries the trace on, from the gateway's span, on
// both APIs.
func TestCallersTraceContextIsJoinedAndCarriedUpstream(t *testing.T) {
	g, rec := tracedGateway(t, `{use: "tracing"}`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
		option.WithHeader("traceparent", callerParent), option.WithHeader("tracestate", callerState))
	require.NoError(t, err)
	stream := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}},
		anthropicoption.WithHeader("traceparent", callerParent), anthropicoption.WithHeader("tracestate", callerState))
	for stream.Next() {
	}
	require.NoError(t, stream.Err())

	ended := rec.Ended()
	require.Len(t, ended, 2)
	for i, up := range []*upstream{g.oa, g.an} {
		span := ended[i]
		assert.Equal(t, callerTrace, span.SpanContext().TraceID().String())
		assert.True(t, span.Parent().IsRemote())
		assert.Equal(t, callerSpan, span.Parent().SpanID().String())
		assert.Equal(t, callerState, span.SpanContext().TraceState().String())
		require.Equal(t, 1, up.requests())
		assert.Equal(t, "00-"+callerTrace+"-"+span.SpanContext().SpanID().String()+"-01", up.header(0).Get("traceparent"))
		assert.Equal(t, callerState, up.header(0).Get("tracestate"))
	}
}

// A malformed traceparent is not an error: the call is served in a trace
// of its own, which the provider's request carries, and a tracestate
// without a traceparent is dropped.
func TestMalformedTraceparentStartsANewTrace(t *testing.T) {
	text := reply{body: transcript(t, "openai", "text.sse")}
	g, rec := tracedGateway(t, `{use: "tracing"}`, []reply{text, text, text}, nil)
	for _, parent := range []string{"00-" + callerTrace + "-" + callerSpan, "zz-not-a-trace", "00-00000000000000000000000000000000-" + callerSpan + "-01"} {
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
			option.WithHeader("traceparent", parent), option.WithHeader("tracestate", callerState))
		require.NoError(t, err, parent)
	}
	ended := rec.Ended()
	require.Len(t, ended, 3)
	for i, span := range ended {
		assert.NotEqual(t, callerTrace, span.SpanContext().TraceID().String())
		assert.False(t, span.Parent().IsValid(), "a root span")
		assert.Empty(t, span.SpanContext().TraceState().String())
		assert.Equal(t, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01",
			g.oa.header(i).Get("traceparent"))
		assert.Empty(t, g.oa.header(i).Get("tracestate"))
	}
}

// Without a tracing layer the caller's trace context goes on to the
// provider as it came; without one from the caller, the provider's
// request carries none.
func TestTraceContextPassesThroughWithoutTracing(t *testing.T) {
	g := newGateway(t, "", []reply{{body: transcript(t, "openai", "text.sse")}, {body: transcript(t, "openai", "text.sse")}}, nil)
	params := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	_, err := g.openai(t).Chat.Completions.New(context.Background(), params,
		option.WithHeader("traceparent", callerParent), option.WithHeader("tracestate", callerState))
	require.NoError(t, err)
	_, err = g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	assert.Equal(t, callerParent, g.oa.header(0).Get("traceparent"))
	assert.Equal(t, callerState, g.oa.header(0).Get("tracestate"))
	assert.Empty(t, g.oa.header(1).Get("traceparent"))
}

// tracedMCPProxy serves an MCP proxy with a tracing layer on its tool
// chain in front of an upstream MCP server with an echo tool over HTTP: it
// returns the proxy, the recorder of its spans and the traceparents the
// upstream received. opts change the proxy's options.
func tracedMCPProxy(t *testing.T, opts ...func(*Options)) (*served, *tracetest.SpanRecorder, func() []string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	var mu sync.Mutex
	var seen []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			mu.Lock()
			seen = append(seen, tp)
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	dir := writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: up: url: %q
chains: tool: [{use: "tracing"}]
`, up.URL))
	o := Options{Source: cueSource(dir), WatchInterval: -1, Deps: runtime.Deps{TracerProvider: tp}}
	for _, f := range opts {
		f(&o)
	}
	s := startServer(t, o)
	return s, rec, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A tool call on the MCP endpoint joins the trace its POST carries, and
// the upstream MCP server's request carries the trace on from the call's
// span.
func TestMCPCallJoinsCallersTrace(t *testing.T) {
	s, rec, seen := tracedMCPProxy(t)
	cs := connectProxy(t, s.url, "", map[string]string{"traceparent": callerParent, "tracestate": callerState})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))

	ended := rec.Ended()
	require.Len(t, ended, 1)
	span := ended[0]
	assert.Equal(t, callerTrace, span.SpanContext().TraceID().String())
	assert.Equal(t, callerSpan, span.Parent().SpanID().String())
	assert.Equal(t, callerState, span.SpanContext().TraceState().String())
	assert.Contains(t, seen(), "00-"+callerTrace+"-"+span.SpanContext().SpanID().String()+"-01")
}

// switchedHeader sends the traceparent it is set to (none when empty).
type switchedHeader struct{ parent atomic.Value }

func (s *switchedHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if p, _ := s.parent.Load().(string); p != "" {
		r.Header.Set("traceparent", p)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The trace of the POST that opened an MCP session is not the trace of
// the session's later calls: a call whose POST carries no traceparent, or
// a malformed one, starts a trace of its own.
func TestMCPCallWithoutTraceparentStartsItsOwnTrace(t *testing.T) {
	s, rec, seen := tracedMCPProxy(t)
	sw := &switchedHeader{}
	sw.parent.Store(callerParent)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp",
		HTTPClient: &http.Client{Transport: sw}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	for _, parent := range []string{"", "zz-not-a-trace"} {
		sw.parent.Store(parent)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
	}

	ended := rec.Ended()
	require.Len(t, ended, 2)
	for _, span := range ended {
		assert.NotEqual(t, callerTrace, span.SpanContext().TraceID().String())
		assert.False(t, span.Parent().IsValid(), "a root span")
	}
	for _, p := range seen() {
		assert.NotContains(t, p, callerTrace)
	}
}

// A host that serves the gateway as an http.Handler inside a span of its
// own (its tracing middleware having read the caller's traceparent)
// keeps that span the parent: the gateway's spans and the provider's
// request are the host span's, not siblings of it under the caller's.
func TestHostSpanIsKeptAsTheParent(t *testing.T) {
	g, rec := tracedGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var mu sync.Mutex
	var hostSpan string
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tp.Tracer("host").Start(ctx, "host")
		defer span.End()
		mu.Lock()
		hostSpan = span.SpanContext().SpanID().String()
		mu.Unlock()
		g.srv.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(host.Close)
	c := openai.NewClient(option.WithBaseURL(host.URL+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
		option.WithHeader("traceparent", callerParent), option.WithHeader("tracestate", callerState))
	require.NoError(t, err)

	ended := rec.Ended()
	require.Len(t, ended, 1)
	span := ended[0]
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, callerTrace, span.SpanContext().TraceID().String())
	assert.False(t, span.Parent().IsRemote(), "the host's span, not the caller's")
	assert.Equal(t, hostSpan, span.Parent().SpanID().String())
	assert.Equal(t, "00-"+callerTrace+"-"+span.SpanContext().SpanID().String()+"-01", g.oa.header(0).Get("traceparent"))
}

// With NoTraceContext (OTEL_PROPAGATORS without tracecontext) the
// gateway reads no traceparent and sends none: a call's spans start a
// trace of their own, and neither the provider nor the MCP server hears
// of the caller's trace or of the gateway's.
func TestNoTraceContextNeitherJoinsNorCarries(t *testing.T) {
	g, rec := tracedGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil,
		func(o *Options) { o.NoTraceContext = true })
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
		option.WithHeader("traceparent", callerParent), option.WithHeader("tracestate", callerState))
	require.NoError(t, err)
	ended := rec.Ended()
	require.Len(t, ended, 1)
	assert.NotEqual(t, callerTrace, ended[0].SpanContext().TraceID().String())
	assert.False(t, ended[0].Parent().IsValid(), "a root span")
	assert.Empty(t, g.oa.header(0).Values("traceparent"))
	assert.Empty(t, g.oa.header(0).Values("tracestate"))

	s, mrec, seen := tracedMCPProxy(t, func(o *Options) { o.NoTraceContext = true })
	cs := connectProxy(t, s.url, "", map[string]string{"traceparent": callerParent, "tracestate": callerState})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	require.Len(t, mrec.Ended(), 1)
	assert.False(t, mrec.Ended()[0].Parent().IsValid(), "a root span")
	assert.Empty(t, seen())
}

// metaTool answers the _meta of its request, as JSON.
func metaTool(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(req.Params.GetMeta())
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}

// An upstream MCP server gets the trace of the call it serves in its
// request's _meta (traceparent, tracestate), the MCP convention, whether
// it is a url or a command: a command server had none. With
// NoTraceContext it gets none.
func TestMCPUpstreamGetsTraceContextInMeta(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "meta"}, metaTool)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	for name, server := range map[string]string{
		"url":     fmt.Sprintf(`{url: %q}`, ts.URL),
		"command": fmt.Sprintf(`{command: [%q, "-test.run=^TestMCPStdioHelper$"], env: AGENTC_TEST_MCP_STDIO: "1"}`, os.Args[0]),
	} {
		for _, off := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/NoTraceContext=%v", name, off), func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: %s\nchains: tool: [{use: \"tracing\"}]\n", server))
				s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, Deps: runtime.Deps{TracerProvider: tp}, NoTraceContext: off})
				cs := connectProxy(t, s.url, "", map[string]string{"traceparent": callerParent, "tracestate": callerState})
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "meta"})
				require.NoError(t, err)
				require.False(t, res.IsError, text(t, res))
				var meta map[string]any
				require.NoError(t, json.Unmarshal([]byte(text(t, res)), &meta))
				ended := rec.Ended()
				require.Len(t, ended, 1)
				if off {
					assert.NotContains(t, meta, "traceparent")
					assert.NotContains(t, meta, "tracestate")
					return
				}
				assert.Equal(t, "00-"+callerTrace+"-"+ended[0].SpanContext().SpanID().String()+"-01", meta["traceparent"])
				assert.Equal(t, callerState, meta["tracestate"])
			})
		}
	}
}

// accessLines returns the access log lines of logs, written as JSON.
func accessLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	return lines
}

// jsonLog has the server log JSON lines into logs.
func jsonLog(logs *rt.LogBuffer) func(*Options) {
	return func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }
}

// The access log line of a traced request names its trace and span
// (trace_id, span_id), so the line can be found from the trace and the
// trace from the line: the outermost tracing layer's span, in the caller's
// trace or a sampled root of its own, on the chat routes as on the MCP
// endpoint; without a tracing layer, the caller's span its traceparent
// names. A request that is not traced (no traceparent, or trace context
// off, and no sampled span) names none.
func TestAccessLogNamesTheTrace(t *testing.T) {
	sse := reply{body: transcript(t, "openai", "text.sse")}
	chat := func(t *testing.T, g *gateway, parent string) {
		t.Helper()
		var opts []option.RequestOption
		if parent != "" {
			opts = append(opts, option.WithHeader("traceparent", parent))
		}
		_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, opts...)
		require.NoError(t, err)
	}
	ids := func(line map[string]any) [2]any { return [2]any{line["trace_id"], line["span_id"]} }

	t.Run("tracing layer", func(t *testing.T) {
		logs := &rt.LogBuffer{}
		g, rec := tracedGateway(t, `{use: "tracing"}`, []reply{sse, sse}, nil, jsonLog(logs))
		chat(t, g, callerParent)
		chat(t, g, "")
		require.NoError(t, g.stop())
		ended, lines := rec.Ended(), accessLines(t, logs.String())
		require.Len(t, ended, 2)
		require.Len(t, lines, 2)
		assert.Equal(t, callerTrace, ended[0].SpanContext().TraceID().String())
		for i, span := range ended {
			assert.Equal(t, [2]any{span.SpanContext().TraceID().String(), span.SpanContext().SpanID().String()}, ids(lines[i]))
		}
	})
	t.Run("caller's trace only", func(t *testing.T) {
		logs := &rt.LogBuffer{}
		g := newGateway(t, "", []reply{sse, sse}, nil, jsonLog(logs))
		chat(t, g, callerParent)
		chat(t, g, "")
		require.NoError(t, g.stop())
		lines := accessLines(t, logs.String())
		require.Len(t, lines, 2)
		assert.Equal(t, [2]any{callerTrace, callerSpan}, ids(lines[0]))
		assert.Equal(t, [2]any{nil, nil}, ids(lines[1]), "not traced")
	})
	t.Run("trace context off", func(t *testing.T) {
		logs := &rt.LogBuffer{}
		g := newGateway(t, "", []reply{sse}, nil, jsonLog(logs), func(o *Options) { o.NoTraceContext = true })
		chat(t, g, callerParent)
		require.NoError(t, g.stop())
		lines := accessLines(t, logs.String())
		require.Len(t, lines, 1)
		assert.Equal(t, [2]any{nil, nil}, ids(lines[0]))
	})
	t.Run("root not sampled", func(t *testing.T) {
		logs := &rt.LogBuffer{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		g := newGateway(t, `{use: "tracing"}`, []reply{sse}, nil, jsonLog(logs), func(o *Options) { o.Deps.TracerProvider = tp })
		chat(t, g, "")
		require.NoError(t, g.stop())
		lines := accessLines(t, logs.String())
		require.Len(t, lines, 1)
		assert.Equal(t, [2]any{nil, nil}, ids(lines[0]))
	})
	t.Run("mcp", func(t *testing.T) {
		logs := &rt.LogBuffer{}
		s, rec, _ := tracedMCPProxy(t, jsonLog(logs))
		cs := connectProxy(t, s.url, "", map[string]string{"traceparent": callerParent})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
		require.NoError(t, cs.Close())
		require.NoError(t, s.stop())
		ended := rec.Ended()
		require.Len(t, ended, 1)
		var calls []map[string]any
		for _, l := range accessLines(t, logs.String()) {
			if l["run"] != "" {
				calls = append(calls, l)
			}
		}
		require.Len(t, calls, 1)
		assert.Equal(t, [2]any{callerTrace, ended[0].SpanContext().SpanID().String()}, ids(calls[0]))
	})
}

// A tool call whose trace context comes in its _meta (traceparent,
// tracestate), as MCP clients send it, joins the caller's trace as one
// its POST's headers name does; the headers win when both are sent, and
// with NoTraceContext neither is read.
func TestMCPCallJoinsTraceInMeta(t *testing.T) {
	const headerTrace = "0af7651916cd43dd8448eb211c80319c"
	for _, tc := range []struct {
		name   string
		header map[string]string
		off    bool
		want   string
	}{
		{name: "meta", want: callerTrace},
		{name: "header first", header: map[string]string{"traceparent": "00-" + headerTrace + "-b7ad6b7169203331-01"}, want: headerTrace},
		{name: "off", off: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec, _ := tracedMCPProxy(t, func(o *Options) { o.NoTraceContext = tc.off })
			cs := connectProxy(t, s.url, "", tc.header)
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
			params.Meta = mcp.Meta{"traceparent": callerParent, "tracestate": callerState}
			res, err := cs.CallTool(context.Background(), params)
			require.NoError(t, err)
			require.False(t, res.IsError, text(t, res))
			ended := rec.Ended()
			require.Len(t, ended, 1)
			sc := ended[0].SpanContext()
			if tc.want == "" {
				assert.False(t, ended[0].Parent().IsValid(), "a root span")
				return
			}
			assert.Equal(t, tc.want, sc.TraceID().String())
			assert.True(t, ended[0].Parent().IsRemote())
			if tc.want == callerTrace {
				assert.Equal(t, callerSpan, ended[0].Parent().SpanID().String())
				assert.Equal(t, callerState, sc.TraceState().String())
			}
		})
	}
}

// The access log line of an MCP tool call whose trace came in its _meta
// names that trace, the caller's span, when no sampled tracing span does:
// the request joined it as one whose POST's traceparent names it.
func TestAccessLogNamesTheTraceInMeta(t *testing.T) {
	logs := &rt.LogBuffer{}
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	t.Cleanup(func() { _ = never.Shutdown(context.Background()) })
	s, _, _ := tracedMCPProxy(t, jsonLog(logs), func(o *Options) { o.Deps.TracerProvider = never })
	cs := connectProxy(t, s.url, "", nil)
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
	params.Meta = mcp.Meta{"traceparent": callerParent}
	res, err := cs.CallTool(context.Background(), params)
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	require.NoError(t, cs.Close())
	require.NoError(t, s.stop())
	var calls []map[string]any
	for _, l := range accessLines(t, logs.String()) {
		if l["run"] != "" {
			calls = append(calls, l)
		}
	}
	require.Len(t, calls, 1)
	assert.Equal(t, callerTrace, calls[0]["trace_id"])
	assert.Equal(t, callerSpan, calls[0]["span_id"])
}

// A client's _meta is not sent on to the upstream MCP server: its other
// keys never are, and its trace context only as the trace the call
// joined (without a tracing layer, the client's), none with trace
// context off.
func TestClientMetaIsNotSentUpstream(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "meta"}, metaTool)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	const clientParent = "00-11111111111111111111111111111111-2222222222222222-01"
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoTraceContext=%v", off), func(t *testing.T) {
			dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: url: %q\n", ts.URL))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, NoTraceContext: off})
			cs := connectProxy(t, s.url, "", nil)
			params := &mcp.CallToolParams{Name: "meta"}
			params.Meta = mcp.Meta{"traceparent": clientParent, "tracestate": "client=1", "authorization": "Bearer x"}
			res, err := cs.CallTool(context.Background(), params)
			require.NoError(t, err)
			require.False(t, res.IsError, text(t, res))
			var meta map[string]any
			require.NoError(t, json.Unmarshal([]byte(text(t, res)), &meta))
			assert.NotContains(t, meta, "authorization")
			if off {
				assert.NotContains(t, meta, "traceparent")
				assert.NotContains(t, meta, "tracestate")
				return
			}
			// Without a tracing layer the call carries on the trace it
			// joined, the client's: the span the client named, as a
			// traceparent header would be.
			assert.Equal(t, clientParent, meta["traceparent"])
			assert.Equal(t, "client=1", meta["tracestate"])
		})
	}
}
