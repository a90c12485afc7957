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
