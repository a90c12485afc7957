package wire

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// A tracestate sent as several header lines is one list, as HTTP combines
// repeated headers: every entry is kept, in order.
func TestJoinTraceCombinesTracestateLines(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Add("tracestate", "vendor=opaque")
	h.Add("tracestate", "other=1,third=x")
	sc := trace.SpanContextFromContext(JoinTrace(context.Background(), h))
	require.True(t, sc.IsValid())
	assert.Equal(t, "vendor=opaque,other=1,third=x", sc.TraceState().String())
	assert.Equal(t, []string{"vendor=opaque", "other=1,third=x"}, h.Values("tracestate"), "the request's header is left as it is")
}

// An MCP request's _meta gets the traceparent of the span in ctx, its
// tracestate replaced (none kept when the span has none), the other keys
// kept and the caller's map left as it is; WithoutTrace sends none.
func TestCarryTraceMeta(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := JoinTrace(context.Background(), h)
	meta := map[string]any{"progressToken": "p1", "tracestate": "stale=1"}
	got := CarryTraceMeta(ctx, meta)
	assert.Equal(t, map[string]any{"progressToken": "p1", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, got)
	assert.Equal(t, map[string]any{"progressToken": "p1", "tracestate": "stale=1"}, meta, "the caller's map is left as it is")
	assert.Equal(t, meta, CarryTraceMeta(WithoutTrace(ctx), meta))
	assert.Nil(t, CarryTraceMeta(context.Background(), nil))
}

// The trace context of an MCP request's _meta is joined as the headers'
// is; a value that is not a string is ignored.
func TestJoinTraceMeta(t *testing.T) {
	sc := trace.SpanContextFromContext(JoinTraceMeta(context.Background(),
		map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=opaque"}))
	require.True(t, sc.IsValid())
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	assert.Equal(t, "vendor=opaque", sc.TraceState().String())
	assert.False(t, trace.SpanContextFromContext(JoinTraceMeta(context.Background(), map[string]any{"traceparent": 7})).IsValid())
	assert.False(t, trace.SpanContextFromContext(JoinTraceMeta(context.Background(), nil)).IsValid())
}
