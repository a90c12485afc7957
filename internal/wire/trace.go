package wire

import (
	"context"
	"maps"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads and writes the W3C Trace Context headers,
// traceparent and tracestate.
var traceContext propagation.TraceContext

// JoinTrace returns ctx holding, as its remote parent span, the trace
// context h's traceparent and tracestate carry: the spans started in it
// join the caller's trace. A missing or malformed traceparent leaves ctx
// as it is (the spans start a trace of their own), and so does a
// tracestate without a valid traceparent; a tracestate sent as several
// lines is one list. A ctx that already holds a span
// (a host's tracing middleware, which read the headers itself, started
// one around the gateway) is left as it is: that span is the parent.
func JoinTrace(ctx context.Context, h http.Header) context.Context {
	if len(h.Values("traceparent")) == 0 || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if states := h.Values("tracestate"); len(states) > 1 {
		// Repeated lines are one list (RFC 9110): the propagator reads
		// the first line only.
		h = http.Header{"Traceparent": h.Values("traceparent")[:1], "Tracestate": {strings.Join(states, ",")}}
	}
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}

// JoinTraceMeta is JoinTrace for the trace context an MCP request
// carries in its _meta, the MCP convention: its traceparent and
// tracestate, strings (a value of another type is ignored).
func JoinTraceMeta(ctx context.Context, meta map[string]any) context.Context {
	parent, ok := meta["traceparent"].(string)
	if !ok {
		return ctx
	}
	h := http.Header{"Traceparent": {parent}}
	if state, ok := meta["tracestate"].(string); ok {
		h["Tracestate"] = []string{state}
	}
	return JoinTrace(ctx, h)
}

// noTrace marks a context whose requests carry no trace context.
type noTrace struct{}

// WithoutTrace returns ctx marked so that CarryTrace sends no trace
// context from it: trace context is turned off.
func WithoutTrace(ctx context.Context) context.Context {
	return context.WithValue(ctx, noTrace{}, true)
}

// CarryTrace returns h with the traceparent and tracestate of the span
// in ctx (a tracing layer's, or the caller's that JoinTrace read), in
// place of any there: a copy of h, which is left as it is, or h itself
// when ctx holds no valid span context or WithoutTrace marked it.
func CarryTrace(ctx context.Context, h http.Header) http.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() || ctx.Value(noTrace{}) != nil {
		return h
	}
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Del("tracestate")
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	return h
}

// CarryTraceMeta returns meta, an MCP request's _meta, with the
// traceparent and tracestate of the span in ctx, in place of any there,
// as the MCP convention carries trace context whatever the transport: a
// copy of meta, which is left as it is, or meta itself when ctx holds no
// valid span context or WithoutTrace marked it.
func CarryTraceMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() || ctx.Value(noTrace{}) != nil {
		return meta
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	delete(meta, "tracestate")
	for k, v := range c {
		meta[k] = v
	}
	return meta
}
