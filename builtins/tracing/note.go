package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// SpanNote holds the span context of the first span a tracing layer
// started under a context that carries the note (WithSpanNote): the
// outermost layer's span of the call, which a server's access log names
// so that its line and the call's trace lead to each other. Its zero
// value is an empty note; it is safe for concurrent use.
type SpanNote struct {
	first atomic.Pointer[trace.SpanContext]
}

// spanNoteKey is the context key of a SpanNote.
type spanNoteKey struct{}

// WithSpanNote returns ctx carrying n: the first span a tracing layer
// starts under it is noted in n.
func WithSpanNote(ctx context.Context, n *SpanNote) context.Context {
	return context.WithValue(ctx, spanNoteKey{}, n)
}

// SpanContext returns the span context noted, invalid when no tracing
// layer started a span (none ran, or none records: no provider).
func (n *SpanNote) SpanContext() trace.SpanContext {
	if sc := n.first.Load(); sc != nil {
		return *sc
	}
	return trace.SpanContext{}
}

// startSpan starts the layer's span under ctx, noted in the SpanNote ctx
// carries if it is the first.
func (t *Tracing) startSpan(ctx context.Context) (context.Context, trace.Span) {
	sctx, span := t.tracer.Start(ctx, t.SpanName, t.start...)
	if n, ok := ctx.Value(spanNoteKey{}).(*SpanNote); ok && n != nil {
		if sc := span.SpanContext(); sc.IsValid() {
			n.first.CompareAndSwap(nil, &sc)
		}
	}
	return sctx, span
}
