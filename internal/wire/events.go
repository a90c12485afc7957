package wire

import (
	"bufio"
	"bytes"
	"io"
)

// Events frames a body of server-sent events as the SDKs' event decoders
// do (their packages/ssestream: lines split at "\n" with a "\r" before it
// dropped, "event" and "data" fields, comments and other fields skipped,
// an event dispatched at a blank line when it has data, each data line
// followed by "\n" in Data), without their allocation
// of each event's data: Data is valid until the next call of Next. As
// theirs, it reads the body only when no whole line is left, so a
// Lookahead's Body keeps its meaning. Unlike theirs, it ends the events
// with ErrEventTooLarge at an event over MaxEventBytes (LimitEvents).
//
// Not safe for concurrent use (one per stream).
type Events struct {
	r          io.Reader
	buf        []byte
	start, end int // the unread bytes, buf[start:end]
	readErr    error
	err        error
	empties    int
	typ        string
	data       []byte
}

// maxEventLine bounds the line buffer, as the SDKs' decoders do; a line
// of an event over MaxEventBytes fails first (eventLimit).
const maxEventLine = bufio.MaxScanTokenSize << 9

// NewEvents returns the events of r.
func NewEvents(r io.Reader) *Events { return &Events{r: &eventLimit{r: r}} }

// Next reads the next event. It returns false at the end of the body or at
// a read error (Err).
func (e *Events) Next() bool {
	if e.err != nil {
		return false
	}
	e.typ, e.data = "", e.data[:0]
	for {
		line, ok := e.line()
		if !ok {
			return false
		}
		if len(line) == 0 {
			if len(e.data) == 0 {
				e.typ = ""
				continue
			}
			return true
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			e.typ = string(value)
		case "data":
			e.data = append(e.data, value...)
			e.data = append(e.data, '\n')
		}
	}
}

// Type is the event's type ("" when it names none).
func (e *Events) Type() string { return e.typ }

// Data is the event's data, each data line followed by "\n". It is valid
// until the next call of Next.
func (e *Events) Data() []byte { return e.data }

// Err is the error that ended the events: nil at the end of the body.
func (e *Events) Err() error { return e.err }

// line returns the next line, as bufio.Scanner's ScanLines splits them.
// At the end of the body, or a read error (then kept in err), it returns
// false.
func (e *Events) line() ([]byte, bool) {
	for {
		if i := bytes.IndexByte(e.buf[e.start:e.end], '\n'); i >= 0 {
			line := e.buf[e.start : e.start+i]
			e.start += i + 1
			return dropCR(line), true
		}
		if e.readErr != nil {
			if e.start < e.end {
				line := e.buf[e.start:e.end]
				e.start = e.end
				return dropCR(line), true
			}
			if e.readErr != io.EOF {
				e.err = e.readErr
			}
			return nil, false
		}
		e.fill()
	}
}

// fill reads more of the body after the unread bytes, growing the buffer
// as bufio.Scanner does.
func (e *Events) fill() {
	if e.start > 0 {
		e.end = copy(e.buf, e.buf[e.start:e.end])
		e.start = 0
	}
	if e.end == len(e.buf) {
		if len(e.buf) >= maxEventLine {
			e.readErr = bufio.ErrTooLong
			e.start, e.end = 0, 0
			return
		}
		n := max(len(e.buf)*2, 4096)
		buf := make([]byte, min(n, maxEventLine))
		copy(buf, e.buf[:e.end])
		e.buf = buf
	}
	n, err := e.r.Read(e.buf[e.end:])
	if n < 0 || n > len(e.buf)-e.end {
		e.readErr = bufio.ErrBadReadCount
		return
	}
	e.end += n
	if err != nil {
		e.readErr = err
		return
	}
	if n > 0 {
		e.empties = 0
	} else if e.empties++; e.empties >= 100 {
		e.readErr = io.ErrNoProgress
	}
}

func dropCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
