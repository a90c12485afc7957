package wire_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/wire"
)

// event is one decoded event, or the error that ended the events.
type event struct{ Type, Data, Err string }

func sdkEvents(r io.Reader) []event {
	d := ssestream.NewDecoder(&http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(r)})
	var out []event
	for d.Next() {
		ev := d.Event()
		out = append(out, event{Type: ev.Type, Data: string(ev.Data)})
	}
	if err := d.Err(); err != nil {
		out = append(out, event{Err: err.Error()})
	}
	return out
}

func ourEvents(r io.Reader) []event {
	e := wire.NewEvents(r)
	var out []event
	for e.Next() {
		out = append(out, event{Type: e.Type(), Data: string(e.Data())})
	}
	if err := e.Err(); err != nil {
		out = append(out, event{Err: err.Error()})
	}
	return out
}

var eventBodies = []string{
	"",
	"data: {\"a\":1}\n\n",
	"data: {\"a\":1}\n\ndata: [DONE]\n\n",
	"data: one\r\n\r\ndata: two\r\n\r\n",
	"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
	"data: a\ndata: b\n\n",
	"data:no space\n\n",
	"data:  two spaces\n\n",
	"data:\n\n",
	"data\n\n",
	": a comment\ndata: x\n\n",
	"event: ping\n\nevent: \ndata: y\n\n",
	"id: 7\nretry: 10\ndata: z\n\n",
	"\n\n\ndata: after blanks\n\n",
	"data: no blank line at the end\n",
	"data: no newline at the end",
	"data: x\n\ndata: unfinished",
	"event: only a type\n\n",
	"data: colon: inside\n\n",
	"DATA: upper\n\n",
	"data: " + strings.Repeat("x", 9000) + "\n\ndata: next\n\n",
	"data: \r\r\n\n",
	"\r\n",
}

// TestEventsMatchTheSDKDecoder: Events decodes what the SDK's event
// decoder decodes, the same events and the same error, however the body
// arrives (whole, a byte at a time, in halves) and when its read fails.
func TestEventsMatchTheSDKDecoder(t *testing.T) {
	readers := map[string]func(string) io.Reader{
		"whole":      func(s string) io.Reader { return strings.NewReader(s) },
		"byte":       func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":       func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data error": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		"fails": func(s string) io.Reader {
			return io.MultiReader(strings.NewReader(s), iotest.ErrReader(errors.New("connection reset")))
		},
	}
	for name, read := range readers {
		for _, body := range eventBodies {
			assert.Equal(t, sdkEvents(read(body)), ourEvents(read(body)), "%s: %q", name, body)
		}
	}
}

// A line longer than the event bound ends the events at the bound, before
// the SDK's line bound (32 MiB) would.
func TestEventsLineTooLong(t *testing.T) {
	body := "data: " + strings.Repeat("x", 33<<20) + "\n\n"
	got := ourEvents(strings.NewReader(body))
	require.Len(t, got, 1)
	assert.Equal(t, wire.ErrEventTooLarge.Error(), got[0].Err)
}

// An event of endless data lines ends the events once it is past
// MaxEventBytes, its bytes counted from the blank line before it: the
// events before it are read, and the body is read no further than the
// bound. An event just under the bound is read whole.
func TestEventsOverTheEventBound(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<10) + "\n"
	for name, read := range map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r },
		"half":  func(r io.Reader) io.Reader { return iotest.HalfReader(r) },
	} {
		endless := &countingReader{r: io.MultiReader(strings.NewReader("data: before\n\n: ping\n\nevent: big\n"),
			strings.NewReader(strings.Repeat(line, (64<<20)/len(line))))}
		got := ourEvents(read(endless))
		require.Len(t, got, 2, name)
		assert.Equal(t, event{Data: "before\n"}, got[0], name)
		assert.Equal(t, wire.ErrEventTooLarge.Error(), got[1].Err, name)
		assert.Contains(t, got[1].Err, "16 MiB", name)
		assert.Less(t, endless.n, int64(wire.MaxEventBytes+(1<<20)), "%s: the body was read past the bound", name)

		under := "data: a\n\nevent: big\n" + strings.Repeat(line, (wire.MaxEventBytes-len("event: big\n\n"))/len(line)) + "\ndata: b\n\n"
		got = ourEvents(read(strings.NewReader(under)))
		require.Len(t, got, 3, name)
		assert.Equal(t, sdkEvents(strings.NewReader(under)), got, name)
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestEventsNoProgress(t *testing.T) {
	got := ourEvents(emptyReader{})
	require.Equal(t, sdkEvents(emptyReader{}), got)
	require.Len(t, got, 1)
	assert.Equal(t, io.ErrNoProgress.Error(), got[0].Err)
}

// emptyReader reads nothing and no error, forever.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func FuzzEvents(f *testing.F) {
	for _, b := range eventBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		require.Equal(t, sdkEvents(strings.NewReader(body)), ourEvents(strings.NewReader(body)))
		require.Equal(t, sdkEvents(iotest.OneByteReader(strings.NewReader(body))), ourEvents(iotest.OneByteReader(strings.NewReader(body))))
	})
}

// BenchmarkEventsDeltas: a stream of 20,000 ordinary delta events (about
// 2.8 MB), read through the bound on an event's bytes.
func BenchmarkEventsDeltas(b *testing.B) {
	body := strings.Repeat(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"the answer is "}}]}`+"\n\n", 20000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ev := wire.NewEvents(strings.NewReader(body))
		n := 0
		for ev.Next() {
			n++
		}
		if n != 20000 || ev.Err() != nil {
			b.Fatal(n, ev.Err())
		}
	}
}
