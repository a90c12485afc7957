package prove

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The wait of a copy admitted together for the others at the tool ends when
// they have done nothing for a while: a copy that does not come (a layer
// above the tool holds it until another copy's call ends, as an idempotent
// layer holds a duplicate) must not hold the run for good. Every event of a
// copy (a layer entered or left) starts the wait again. It is real time:
// the layers run on real goroutines.
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

// gate orders the concurrent copies of a step so that a run does not
// depend on how their goroutines are scheduled: the copies move one at a
// time, lowest index first, in one of two orders.
//
//   - One after the other: a copy enters the chain once every copy before
//     it has ended its call.
//   - Admitted together: a copy enters the chain once every copy before it
//     has reached the tool (or ended its call); a copy at the tool waits
//     there until every copy of its step has reached it or ended its call,
//     then the copies run the tool one at a time, lowest index first, each
//     to the end of its call before the next runs it. So every layer above
//     the tool admits every copy before it sees the outcome of any: a check
//     made before the call and an update made after it (a hand-written
//     dedupe table, a budget read then charged) interleave as they do for
//     calls of an agent's turn that arrive together.
type gate struct {
	copies   int
	together bool
	mu       sync.Mutex
	steps    map[string]*stepGate
}

// stepGate is the gate of one step, by copy: entered holds the copies that
// entered the chain, at those that reached the tool or ended their call,
// ended those that ended it, waiting those at the tool waiting for their
// turn; turn is the copy running the tool (-1: none).
type stepGate struct {
	entered, at, ended, waiting map[int]bool
	turn                        int
	changed                     chan struct{}
}

func newGate(copies int, together bool) *gate {
	return &gate{copies: copies, together: together, steps: map[string]*stepGate{}}
}

// copyOf splits the path of a copy of a concurrent step into the step's
// path and the copy's index; ok is false for a call that is not a copy.
func copyOf(path string) (step string, i int, ok bool) {
	at := strings.LastIndexByte(path, '/')
	if at < 0 {
		return "", 0, false
	}
	i, err := strconv.Atoi(path[at+1:])
	return path[:at], i, err == nil
}

// of returns the gate of the step the call at path belongs to and the
// copy's index; nil for a call that is not a copy of a concurrent step. The
// caller holds g.mu.
func (g *gate) of(path string) (*stepGate, int) {
	step, i, ok := copyOf(path)
	if !ok {
		return nil, 0
	}
	s := g.steps[step]
	if s == nil {
		s = &stepGate{entered: map[int]bool{}, at: map[int]bool{}, ended: map[int]bool{}, waiting: map[int]bool{}, turn: -1,
			changed: make(chan struct{})}
		g.steps[step] = s
	}
	return s, i
}

func (s *stepGate) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// enter is called when the call at path (scenario.StepPath) enters the
// chain: it returns once the copies before it are out of its way (ended
// their call, or, admitted together, reached the tool).
func (g *gate) enter(ctx context.Context, path string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	s, i := g.of(path)
	g.mu.Unlock()
	if s == nil {
		return
	}
	// The copies before it have the chain to themselves: nothing of this
	// copy holds them. The grace only keeps a call that never ends (that
	// never entered the chain) from holding the run for good.
	g.wait(ctx, s, turnGrace, func() bool {
		for j := range i {
			if !s.ended[j] && !(g.together && s.at[j]) {
				return false
			}
		}
		return true
	})
	g.mu.Lock()
	s.entered[i] = true
	s.signal()
	g.mu.Unlock()
}

// arrive is called when the call at path reaches the tool: it returns once
// it may run it.
func (g *gate) arrive(ctx context.Context, path string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	s, i := g.of(path)
	if s == nil {
		g.mu.Unlock()
		return
	}
	s.at[i], s.waiting[i] = true, true
	s.signal()
	g.mu.Unlock()
	if g.together {
		// The others enter the chain now that this copy is at the tool,
		// however late their goroutines are scheduled; once in, one that
		// does nothing for barrierGrace is held.
		g.wait(ctx, s, turnGrace, func() bool { return len(s.entered) >= g.copies })
		g.wait(ctx, s, barrierGrace, func() bool { return len(s.at) >= g.copies })
	}
	g.wait(ctx, s, turnGrace, func() bool {
		if s.turn >= 0 {
			return s.turn == i
		}
		for j := range s.waiting {
			if j < i {
				return false
			}
		}
		return true
	})
	g.mu.Lock()
	if s.turn < 0 {
		s.turn = i
	}
	delete(s.waiting, i)
	g.mu.Unlock()
}

// progress is called for each event of a run: an event of a copy tells
// the copies waiting in its step that it is not held.
func (g *gate) progress(path string) {
	if g == nil {
		return
	}
	step, _, ok := copyOf(path)
	if !ok {
		return
	}
	g.mu.Lock()
	if s := g.steps[step]; s != nil {
		s.signal()
	}
	g.mu.Unlock()
}

// end is called when the call at path ends: the next copy may enter the
// chain, or run the tool.
func (g *gate) end(path string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, i := g.of(path)
	if s == nil {
		return
	}
	s.at[i], s.ended[i] = true, true
	delete(s.waiting, i)
	if s.turn == i {
		s.turn = -1
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
