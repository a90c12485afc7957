package runtime

import (
	"context"
	goruntime "runtime"
	"sort"
	"sync"
	"time"
)

// Clock is the time port of the runtime: every layer that waits or reads the
// time (retry backoff and breaker cooldown, rate_limit refill, hedge delays,
// state TTLs, audit timestamps) goes through the pipeline's clock, so that a
// virtual clock runs a pipeline without sleeping. Implementations must be
// safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx ends, in which case it returns ctx's
	// error. A d of zero or less returns ctx.Err() at once.
	Sleep(ctx context.Context, d time.Duration) error
	// AfterFunc calls f once d has elapsed (in its own goroutine for the
	// real clock). stop cancels the call and reports whether it did so
	// before f was called.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock; it is the default of Deps.Clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep implements Clock with a timer that respects ctx.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// AfterFunc implements Clock with time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// VirtualClock is a clock that never waits for real: time moves only through
// Sleep and Advance, so a run on a VirtualClock is as fast as its code and its
// waits are exact. It keeps the order of concurrent waits: a Sleep first runs
// the AfterFunc callbacks that fall due before its deadline (in deadline
// order, ties in registration order, each at its own time), then, when
// another goroutine sleeps until an earlier time, waits for that one to wake
// first. After callbacks ran, or another sleeper woke, a Sleep gives the
// goroutines woken some real time to act at the present time (a hedge
// starting its backup, or cancelling the racers that lost) before it moves
// the time on.
type VirtualClock struct {
	// Grace is the most real time a Sleep grants the goroutines woken by
	// callbacks that fell due (default 20ms); it ends early when the
	// sleeper's context ends or the clock is used.
	Grace time.Duration

	mu       sync.Mutex
	now      time.Time
	seq      int
	timers   []*virtualTimer
	sleepers map[*virtualTimer]struct{}
	changed  chan struct{}
	// woke is set when a Sleep returns at the present time, until the next
	// Sleep starts: a Sleep waiting meanwhile that would move the time on
	// first grants the woken goroutine the grace.
	woke bool
}

type virtualTimer struct {
	at   time.Time
	seq  int
	f    func()
	done bool
}

// NewVirtualClock returns a virtual clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock {
	return &VirtualClock{Grace: 20 * time.Millisecond, now: start, sleepers: map[*virtualTimer]struct{}{}, changed: make(chan struct{})}
}

// Now implements Clock.
func (v *VirtualClock) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// signal wakes the sleepers waiting for a change. The caller holds v.mu.
func (v *VirtualClock) signal() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// Sleep implements Clock: it waits, in virtual time, until now+d, and
// returns ctx's error if ctx ended meanwhile (a callback that fell due, such
// as an attempt timeout, may end it).
func (v *VirtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	v.mu.Lock()
	v.seq++
	me := &virtualTimer{at: v.now.Add(d), seq: v.seq}
	v.sleepers[me] = struct{}{}
	v.woke = false // a goroutine acts: the one woken, or another
	v.signal()
	defer func() {
		delete(v.sleepers, me)
		v.signal()
		v.mu.Unlock()
	}()
	yielded := false
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if due := v.takeDue(me.at); len(due) > 0 {
			ch := v.changed
			v.mu.Unlock()
			for _, t := range due {
				t.f()
			}
			v.grace(ctx, ch)
			v.mu.Lock()
			continue
		}
		first := true
		for o := range v.sleepers {
			if o != me && (o.at.Before(me.at) || o.at.Equal(me.at) && o.seq < me.seq) {
				first = false
				break
			}
		}
		if first {
			if me.at.After(v.now) {
				if v.woke {
					// A sleeper just woke at the present time: give its
					// goroutine the grace to act at that time (a hedge
					// cancelling the racers that lost) before moving on.
					v.woke = false
					ch := v.changed
					v.mu.Unlock()
					v.grace(ctx, ch)
					v.mu.Lock()
					continue
				}
				if !yielded {
					// Let goroutines that are runnable but not asleep
					// yet (a racer just started) reach their Sleep before
					// the time moves past the present.
					yielded = true
					v.mu.Unlock()
					for range yieldRounds {
						goruntime.Gosched()
					}
					v.mu.Lock()
					continue
				}
				v.now = me.at
			}
			v.woke = true
			return ctx.Err()
		}
		ch := v.changed
		v.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		v.mu.Lock()
	}
}

// yieldRounds is how many times a Sleep yields the processor before it
// moves the time on.
const yieldRounds = 4

// grace gives the goroutines that callbacks woke up to Grace of real time,
// ending early once ctx ends or the clock changed since ch was taken (one of
// them sleeps or sets a timer).
func (v *VirtualClock) grace(ctx context.Context, ch <-chan struct{}) {
	if v.Grace <= 0 {
		return
	}
	t := time.NewTimer(v.Grace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-ch:
	}
}

// takeDue removes the callbacks due at or before until, in order, and moves
// the time to the last one's deadline. The caller holds v.mu.
func (v *VirtualClock) takeDue(until time.Time) []*virtualTimer {
	var due []*virtualTimer
	keep := v.timers[:0]
	for _, t := range v.timers {
		if !t.at.After(until) {
			t.done = true
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	clear(v.timers[len(keep):])
	v.timers = keep
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	if n := len(due); n > 0 && due[n-1].at.After(v.now) {
		v.now = due[n-1].at
	}
	return due
}

// Advance moves the time forward by d and runs the callbacks that fell due.
func (v *VirtualClock) Advance(d time.Duration) {
	v.mu.Lock()
	if d > 0 {
		v.now = v.now.Add(d)
	}
	due := v.takeDue(v.now)
	v.signal()
	v.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// AfterFunc implements Clock: f runs when a Sleep or Advance reaches d from
// now (at once, in the caller, when d is zero or less).
func (v *VirtualClock) AfterFunc(d time.Duration, f func()) func() bool {
	if d <= 0 {
		f()
		return func() bool { return false }
	}
	v.mu.Lock()
	v.seq++
	t := &virtualTimer{at: v.now.Add(d), seq: v.seq, f: f}
	v.timers = append(v.timers, t)
	v.signal()
	v.mu.Unlock()
	return func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		for i, o := range v.timers {
			if o == t {
				v.timers = append(v.timers[:i], v.timers[i+1:]...)
				break
			}
		}
		return true
	}
}

var (
	_ Clock = RealClock{}
	_ Clock = (*VirtualClock)(nil)
)

// clock returns the deps' clock (the real one when unset).
func (d *Deps) clock() Clock {
	if d.Clock != nil {
		return d.Clock
	}
	return RealClock{}
}

// Clock returns the pipeline's clock (Deps.Clock, else the real clock).
// Layers read the time and wait through it.
func (b *BuildContext) Clock() Clock { return b.p.deps.clock() }
