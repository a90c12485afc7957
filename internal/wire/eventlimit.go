package wire

import (
	"bytes"
	"errors"
	"io"
)

// MaxEventBytes is the most an upstream's server-sent event may hold: its
// bytes from the blank line before it (or the start of the body) to the
// blank line that ends it, its field names, comments and line ends
// counted. It is the bound of an upstream MCP message.
const MaxEventBytes = 16 << 20

// ErrEventTooLarge ends a stream with an event over MaxEventBytes: an
// upstream that sends one (endless data lines, a line without end) is
// broken or hostile, and reading it would hold the event in memory until
// the upstream stops.
var ErrEventTooLarge = errors.New("an event of the upstream's stream is larger than the 16 MiB limit")

// LimitEvents returns r, whose read fails with ErrEventTooLarge once an
// event is over MaxEventBytes: the bytes before that point are read, so
// the whole events before it still are. It is for a decoder that does not
// bound an event itself (the SDKs' ssestream).
func LimitEvents(r io.ReadCloser) io.ReadCloser { return &eventLimit{r: r, c: r} }

// eventLimit counts the bytes of the event being read: since the last
// blank line (a line that is empty once a "\r" before its "\n" is
// dropped), as the SDKs' decoders split events.
type eventLimit struct {
	r io.Reader
	c io.Closer
	// since is the event's bytes so far; line those of its current line.
	since, line int
	// cr reports a current line of a lone "\r".
	cr  bool
	err error
}

func (l *eventLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	if n < 0 || n > len(p) {
		return n, err // the decoder reports the bad count
	}
	// Line by line, each found by bytes.IndexByte: its bytes counted at
	// once, then its "\n".
	for off := 0; off < n; {
		k := bytes.IndexByte(p[off:n], '\n')
		seg := k
		if k < 0 {
			seg = n - off
		}
		if seg > 0 {
			l.cr = l.line == 0 && seg == 1 && p[off] == '\r'
			l.line += seg
			if l.since+seg > MaxEventBytes {
				l.err = ErrEventTooLarge
				return off + max(MaxEventBytes-l.since, 0), l.err
			}
			l.since += seg
		}
		if k < 0 {
			break
		}
		l.since++
		if l.line == 0 || l.line == 1 && l.cr {
			l.since = 0
		}
		l.line, l.cr = 0, false
		off += k + 1
	}
	return n, err
}

func (l *eventLimit) Close() error {
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}

// MaxResponseBytes is the most read of an upstream's response that is not
// a stream (a token count's answer, a few bytes): a response that SDK
// reads whole.
const MaxResponseBytes = 1 << 20

// ErrResponseTooLarge fails a response over MaxResponseBytes.
var ErrResponseTooLarge = errors.New("the upstream's response is larger than the 1 MiB limit")

// LimitResponse returns r, whose read fails with ErrResponseTooLarge once
// it is past MaxResponseBytes.
func LimitResponse(r io.ReadCloser) io.ReadCloser {
	return &responseLimit{r: r, left: MaxResponseBytes}
}

type responseLimit struct {
	r    io.ReadCloser
	left int
}

func (l *responseLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrResponseTooLarge
	}
	n, err := l.r.Read(p[:min(len(p), l.left+1)])
	if l.left -= n; l.left < 0 {
		return n + l.left, ErrResponseTooLarge
	}
	return n, err
}

func (l *responseLimit) Close() error { return l.r.Close() }
