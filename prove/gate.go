package prove

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime/scenario"
)

// The waits of a gate end when the copies waited for have done nothing for
// a while: a copy that does not come (a layer above the tool holds it
// until another copy's call ends, as an idempotent layer holds a duplicate)
// must not hold the run for good. Every event of a copy (a layer entered or
// left) starts the wait again. They are real time: the layers run on real
// goroutines.
var (
	// barrierGrace is how long a copy at the tool waits for the others to
	// come after their last event. A variable so that a test on a loaded
	// machine can wait longer.
	barrierGrace = 5 * time.Millisecond
)

const (
	// turnGrace is how long a copy waits for the one running the tool to
	// end its call after its last event (a call can wait on the virtual
	// clock, which grants woken goroutines up to 20 ms).
	turnGrace = 200 * time.Millisecond
)

// gate orders the concurrent copies of a step (admitted together): each
// copy that reaches the tool waits there until every copy of its step has
// passed the layers above the tool (or ended its call), then the copies
// run the tool one at a time, in the order they came, each to the end of
// its call before the next runs it. So every layer above the tool admits
// every copy before it sees the outcome of any: a check made before the
// call and an update made after it (a hand-written dedupe table, a budget
// read then charged) interleave as they do for calls of an agent's turn
// that arrive together.
type gate struct {
	copies int
	mu     sync.Mutex
	steps  map[string]*stepGate
}

// stepGate is the gate of one step: at holds the copies that reached the
// tool or ended their call; turn the copy running the tool.
type stepGate struct {
	at      map[string]bool
	turn    string
	changed chan struct{}
}

func newGate(copies int) *gate {
	return &gate{copies: copies, steps: map[string]*stepGate{}}
}

// of returns the gate of the step the copy at path belongs to; nil for a
// call that is not a copy of a concurrent step. The caller holds g.mu.
func (g *gate) of(path string) *stepGate {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return nil
	}
	s := g.steps[path[:i]]
	if s == nil {
		s = &stepGate{at: map[string]bool{}, changed: make(chan struct{})}
		g.steps[path[:i]] = s
	}
	return s
}

func (s *stepGate) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// arrive is called when the copy of ctx reaches the tool: it returns once
// the copy may run it.
func (g *gate) arrive(ctx context.Context) {
	if g == nil {
		return
	}
	path := scenario.StepPath(ctx)
	g.mu.Lock()
	s := g.of(path)
	if s == nil {
		g.mu.Unlock()
		return
	}
	s.at[path] = true
	s.signal()
	g.mu.Unlock()
	g.wait(ctx, s, barrierGrace, func() bool { return len(s.at) >= g.copies })
	g.wait(ctx, s, turnGrace, func() bool { return s.turn == "" || s.turn == path })
	g.mu.Lock()
	if s.turn == "" {
		s.turn = path
	}
	g.mu.Unlock()
}

// progress is called for each event of a run: an event of a copy tells
// the copies waiting in its step that it is not held.
func (g *gate) progress(path string) {
	if g == nil {
		return
	}
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return
	}
	g.mu.Lock()
	if s := g.steps[path[:i]]; s != nil {
		s.signal()
	}
	g.mu.Unlock()
}

// end is called when the call of the copy of ctx ends: the next copy may
// run the tool.
func (g *gate) end(ctx context.Context) {
	if g == nil {
		return
	}
	path := scenario.StepPath(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.of(path)
	if s == nil {
		return
	}
	s.at[path] = true
	if s.turn == path {
		s.turn = ""
	}
	s.signal()
}

// wait returns once ready holds (read under g.mu), ctx ended, or grace
// passed without an event of the step.
func (g *gate) wait(ctx context.Context, s *stepGate, grace time.Duration, ready func() bool) {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		g.mu.Lock()
		ok, ch := ready(), s.changed
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
			// Something happened in the step: the copies waited for are
			// not held.
			timer.Reset(grace)
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
