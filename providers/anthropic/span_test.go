package anthropic_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// The SDK's span of a call, recorded through the provider a host
// registers with OpenTelemetry, names the model the request asks for and
// the max_tokens it sends, as the request's own body does, and the model
// that answered: the client sends a body it encodes itself, which the
// span does not read.
func TestSpanNamesTheModel(t *testing.T) {
	rec, _ := registeredProvider(t)
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	req := hi()
	req.MaxTokens = 256
	_, err := ssetest.Collect(t, client(t, s), req)
	require.NoError(t, err)

	ended := rec.Ended()
	require.Len(t, ended, 1)
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range ended[0].Attributes() {
		attrs[kv.Key] = kv.Value
	}
	assert.Equal(t, "claude-sonnet-4-5", attrs["gen_ai.request.model"].AsString())
	assert.Equal(t, int64(256), attrs["gen_ai.request.max_tokens"].AsInt64())
	assert.Equal(t, "claude-sonnet-4-5-20250929", attrs["gen_ai.response.model"].AsString())
	assert.JSONEq(t, `{"stream": true, "model": "claude-sonnet-4-5", "max_tokens": 256,
		"system": [{"type": "text", "text": "be kind"}], "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}`,
		string(s.Bodies()[0]), "the body sent is the client's own")
}

// Without a provider registered the SDK records no span, and the span of
// the caller's context (a tracing layer's) is left as it is: the model
// that answered is the SDK span's attribute only.
func TestCallersSpanIsLeftAlone(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("caller").Start(context.Background(), "chat")
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	req := hi()
	require.NoError(t, client(t, s).Stream(ctx, &req, func(runtime.Delta) bool { return true }))
	span.End()

	ended := rec.Ended()
	require.Len(t, ended, 1)
	assert.Empty(t, ended[0].Attributes())
}

// tracedTransport sends each request inside a span of its own, a child of
// the span of the request's context, which ends when the response's body is
// closed, as a host's HTTP instrumentation does.
type tracedTransport struct {
	tracer trace.Tracer
	next   http.RoundTripper
}

func (t tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(req.Context(), "HTTP POST")
	res, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.End()
		return nil, err
	}
	res.Body = spanBody{ReadCloser: res.Body, span: span}
	return res, nil
}

// spanBody ends its span when it is closed.
type spanBody struct {
	io.ReadCloser
	span trace.Span
}

func (b spanBody) Close() error {
	b.span.End()
	return b.ReadCloser.Close()
}

// The model that answered is the SDK span's attribute, not that of the
// span a host's HTTP instrumentation starts inside it: the response's
// request is the one the instrumentation sent, in its own span.
func TestSpanNamesTheModelUnderHTTPInstrumentation(t *testing.T) {
	rec, tp := registeredProvider(t)
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	hc := &http.Client{Transport: tracedTransport{tracer: tp.Tracer("http"), next: http.DefaultTransport}}
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: s.URL, HTTPClient: hc})
	require.NoError(t, err)
	_, err = ssetest.Collect(t, c, hi())
	require.NoError(t, err)

	ended := rec.Ended()
	require.Len(t, ended, 2)
	models := map[string]string{}
	for _, sp := range ended {
		for _, kv := range sp.Attributes() {
			if kv.Key == "gen_ai.response.model" {
				models[sp.Name()] = kv.Value.AsString()
			}
		}
	}
	assert.Equal(t, map[string]string{"anthropic.messages.create": "claude-sonnet-4-5-20250929"}, models)
}

// unwrapTransport answers with a body that can be unwrapped, as some
// HTTP clients' wrappers are.
type unwrapTransport struct{ next http.RoundTripper }

func (t unwrapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = unwrapBody{ReadCloser: res.Body}
	return res, nil
}

type unwrapBody struct{ io.ReadCloser }

func (b unwrapBody) Unwrap() io.ReadCloser { return b.ReadCloser }

// Without a provider registered, the caller's span is left alone whatever
// the host's HTTP client wraps the body in: the SDK sent the request in
// the caller's context, where it made no span of its own.
func TestCallersSpanIsLeftAloneUnderAWrappedBody(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("caller").Start(context.Background(), "chat")
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	hc := &http.Client{Transport: unwrapTransport{next: http.DefaultTransport}}
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: s.URL, HTTPClient: hc})
	require.NoError(t, err)
	req := hi()
	require.NoError(t, c.Stream(ctx, &req, func(runtime.Delta) bool { return true }))
	span.End()

	ended := rec.Ended()
	require.Len(t, ended, 1)
	assert.Empty(t, ended[0].Attributes())
}

// registeredProvider registers with OpenTelemetry, for the test, a provider
// whose spans rec records.
func registeredProvider(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec, tp
}
