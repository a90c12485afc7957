package runtime

import (
	"context"
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

// VirtualClock is a clock that never waits: Sleep advances the virtual time
// by its duration at once and runs the AfterFunc callbacks that fall due, in
// order of their deadlines (ties in order of registration), in the sleeping
// goroutine. Time moves only through Sleep and Advance, so a run on a
// VirtualClock is as fast as its code and its waits are exact. Concurrent
// sleepers each advance the time from its current value.
type VirtualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*virtualTimer
	// Yield, when set, is called after callbacks fell due, before Sleep
	// returns, so that the goroutines they woke run before the sleeper
	// continues (the hedge race, for instance). Nil: nothing.
	Yield func()
}

type virtualTimer struct {
	at   time.Time
	seq  int
	f    func()
	done bool
}

// NewVirtualClock returns a virtual clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock {
	return &VirtualClock{now: start}
}

// Now implements Clock.
func (v *VirtualClock) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Sleep implements Clock: it advances the time by d (unless ctx has already
// ended) and returns ctx.Err() as it stands afterwards, which lets a callback
// that fell due (an attempt timeout) end the sleeper's context.
func (v *VirtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	v.Advance(d)
	return ctx.Err()
}

// Advance moves the time forward by d and runs the callbacks that fell due.
func (v *VirtualClock) Advance(d time.Duration) {
	v.mu.Lock()
	if d > 0 {
		v.now = v.now.Add(d)
	}
	var due []*virtualTimer
	keep := v.timers[:0]
	for _, t := range v.timers {
		if !t.at.After(v.now) {
			t.done = true
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	clear(v.timers[len(keep):])
	v.timers = keep
	yield := v.Yield
	v.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		t.f()
	}
	if len(due) > 0 && yield != nil {
		yield()
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
