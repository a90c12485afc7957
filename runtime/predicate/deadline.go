package predicate

import (
	"context"
	"sync"
	"time"
)

// deadline is the context of a cost-tracked evaluation: done when its
// parent is, or MaxEvalTime after it started, whichever comes first. It is
// context.WithTimeout's context without its allocations: a deadline whose
// timer and parent did not fire goes back to a pool with its channel and
// its timer, and the evaluator's own cancellable context registers on it
// through AfterFunc instead of a goroutine.
type deadline struct {
	parent context.Context
	at     time.Time
	timer  *time.Timer
	// stopParent unregisters the parent's AfterFunc (nil when the parent
	// is never done).
	stopParent func() bool
	// stopAfter is d.unregister and onParent closes d as its parent's
	// AfterFunc, bound once.
	stopAfter func() bool
	onParent  func()

	mu     sync.Mutex
	done   chan struct{}
	closed bool
	// timedOut is set when MaxEvalTime passed before the parent was done.
	timedOut bool
	// after is the function registered through AfterFunc, if any.
	after func()
	// waited is set when a goroutine waits on done: d is not reused.
	waited bool
}

var deadlines = sync.Pool{New: func() any {
	d := &deadline{done: make(chan struct{})}
	d.timer = time.AfterFunc(time.Hour, func() { d.close(true) })
	d.timer.Stop()
	d.stopAfter = d.unregister
	d.onParent = func() { d.close(false) }
	return d
}}

// startDeadline returns a deadline over parent, its timer running.
func startDeadline(parent context.Context) *deadline {
	d := deadlines.Get().(*deadline)
	d.parent = parent
	d.at = time.Now().Add(MaxEvalTime)
	d.timer.Reset(MaxEvalTime)
	if parent.Done() != nil {
		d.stopParent = context.AfterFunc(parent, d.onParent)
	}
	return d
}

// release stops d; d goes back to the pool unless it was done (its
// channel is closed) or its timer or parent may still fire.
func (d *deadline) release() {
	reuse := d.timer.Stop()
	if d.stopParent != nil && !d.stopParent() {
		reuse = false
	}
	d.mu.Lock()
	reuse = reuse && !d.closed && !d.waited && d.after == nil
	d.mu.Unlock()
	if reuse {
		d.parent, d.stopParent = nil, nil
		deadlines.Put(d)
	}
}

// close closes the channel once, and runs the function registered on d.
func (d *deadline) close(timedOut bool) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed, d.timedOut = true, timedOut
	close(d.done)
	f := d.after
	d.after = nil
	d.mu.Unlock()
	if f != nil {
		f()
	}
}

// expired reports whether MaxEvalTime passed before the parent was done.
func (d *deadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timedOut
}

// Deadline implements context.Context.
func (d *deadline) Deadline() (time.Time, bool) {
	if t, ok := d.parent.Deadline(); ok && t.Before(d.at) {
		return t, true
	}
	return d.at, true
}

// Done implements context.Context.
func (d *deadline) Done() <-chan struct{} { return d.done }

// Err implements context.Context.
func (d *deadline) Err() error {
	d.mu.Lock()
	closed, timedOut := d.closed, d.timedOut
	d.mu.Unlock()
	switch {
	case !closed:
		return nil
	case timedOut:
		return context.DeadlineExceeded
	}
	return d.parent.Err()
}

// Value implements context.Context.
func (d *deadline) Value(key any) any { return d.parent.Value(key) }

// AfterFunc arranges for f to run once d is done, as context.AfterFunc
// does; the context package calls it for a context derived from d. stop
// reports whether it kept f from running.
func (d *deadline) AfterFunc(f func()) (stop func() bool) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if d.after != nil {
		// A second registration (the evaluator makes one): waited for
		// apart.
		d.waited = true
		d.mu.Unlock()
		return context.AfterFunc(d.parentView(), f)
	}
	d.after = f
	d.mu.Unlock()
	return d.stopAfter
}

// parentView is d as a context whose Done is d's channel, for a
// registration context.AfterFunc waits on with a goroutine.
func (d *deadline) parentView() context.Context { return doneOnly{d} }

// doneOnly hides d's AfterFunc method.
type doneOnly struct{ d *deadline }

func (c doneOnly) Deadline() (time.Time, bool) { return c.d.Deadline() }
func (c doneOnly) Done() <-chan struct{}       { return c.d.Done() }
func (c doneOnly) Err() error                  { return c.d.Err() }
func (c doneOnly) Value(key any) any           { return c.d.Value(key) }

// unregister removes the function AfterFunc registered and reports
// whether it had not run.
func (d *deadline) unregister() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.after == nil {
		return false
	}
	d.after = nil
	return true
}
