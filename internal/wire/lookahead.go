package wire

import (
	"errors"
	"io"

	"github.com/agentc-dev/agentc/runtime"
)

// Lookahead sets runtime.Delta.More on a stream's deltas. It holds each
// delta a client decodes until the next one is decoded, then passes it on
// with More set when the next one carries the same part (text, tool calls,
// thinking: see partOf); before the event decoder reads the response body again
// (it reads only when it has no whole line left, so what it reads next
// may not have arrived yet) it passes the held delta on without More. A
// delta decoded while the upstream pauses therefore reaches the consumer
// before the client waits, and a burst of events the upstream sent at
// once reaches it as deltas a writer can send together.
//
// A client decodes from Body, yields through Yield and calls Flush when
// the stream ends, before it returns. Not safe for concurrent use (one per
// stream).
type Lookahead struct {
	body    io.ReadCloser
	yield   func(runtime.Delta) bool
	held    runtime.Delta
	holding bool
	stopped bool
}

// errStopped is what Body's Read returns once the consumer stopped.
var errStopped = errors.New("the consumer stopped the stream")

// NewLookahead returns the lookahead of body, passing deltas to yield.
// With a nil body (a body the client cannot read through a lookahead)
// Yield passes each delta on at once, without More.
func NewLookahead(body io.ReadCloser, yield func(runtime.Delta) bool) *Lookahead {
	return &Lookahead{body: body, yield: yield}
}

// Body is the response body the client decodes: a read first passes the
// held delta on. Once the consumer stopped, reads fail.
func (l *Lookahead) Body() io.ReadCloser { return lookaheadBody{l} }

// Yield holds d and passes on the delta held before it, with More. It
// returns false when the consumer stopped.
func (l *Lookahead) Yield(d runtime.Delta) bool {
	if l.body == nil {
		l.held, l.holding = d, true
		return l.pass()
	}
	if l.holding {
		l.held.More = partOf(&l.held) == partOf(&d)
		if !l.pass() {
			return false
		}
	}
	if l.stopped {
		return false
	}
	l.held, l.holding = d, true
	return true
}

// Flush passes on the held delta, without More. It returns false when the
// consumer stopped.
func (l *Lookahead) Flush() bool {
	if l.holding {
		l.held.More = false
		return l.pass()
	}
	return !l.stopped
}

// Stopped reports whether the consumer stopped the stream.
func (l *Lookahead) Stopped() bool { return l.stopped }

func (l *Lookahead) pass() bool {
	d := l.held
	l.held, l.holding = runtime.Delta{}, false
	if !l.yield(d) {
		l.stopped = true
	}
	return !l.stopped
}

// partOf names what d carries: text (0), tool calls (1) or thinking (2).
// A delta the next one follows at once but in another part is not marked
// More: a layer may hold the next part back (tool calls, until they are
// checked, for as long as the model takes to write their arguments), and
// the text before it must not wait in a writer's buffer meanwhile.
func partOf(d *runtime.Delta) int {
	switch {
	case len(d.ToolCalls) > 0:
		return 1
	case d.Thinking != nil:
		return 2
	}
	return 0
}

type lookaheadBody struct{ l *Lookahead }

func (b lookaheadBody) Read(p []byte) (int, error) {
	if !b.l.Flush() {
		return 0, errStopped
	}
	return b.l.body.Read(p)
}

func (b lookaheadBody) Close() error { return b.l.body.Close() }
