package anthropic

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/wire"
)

// fakeTraced is a body as the SDK hands one of a traced call: the body to
// decode behind Unwrap, and a decoder that the span follows.
type fakeTraced struct {
	io.ReadCloser
	inner  io.ReadCloser
	traced bool
}

func (f *fakeTraced) Unwrap() io.ReadCloser { return f.inner }

func (f *fakeTraced) TraceEvents(d ssestream.Decoder) ssestream.Decoder {
	f.traced = true
	return d
}

// The event bound holds for a call the SDK traces, and the call stays
// traced: the SDK's decoder reads the bounded body and the span follows
// its events.
func TestTracedBodyKeepsTracingAndTheEventBound(t *testing.T) {
	endless := io.NopCloser(io.MultiReader(strings.NewReader("data: {}\n\nevent: big\n"),
		strings.NewReader(strings.Repeat("data: "+strings.Repeat("x", 1<<10)+"\n", 20<<10))))
	body := &fakeTraced{ReadCloser: io.NopCloser(strings.NewReader("")), inner: endless}
	d := ssestream.NewDecoder(&http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: limitEvents(body)})
	require.NotNil(t, d)
	events := 0
	for d.Next() {
		events++
	}
	assert.Equal(t, 1, events, "the event before the big one")
	assert.ErrorIs(t, d.Err(), wire.ErrEventTooLarge)
	assert.True(t, body.traced, "the span follows the events")
}
