package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// Group collapses concurrent calls of one key in this process: one leads,
// the others wait for its outcome. The zero Group is ready to use.
type Group struct {
	mu      sync.Mutex
	flights map[string]*flight
	// joined, when set (by tests, OnJoin), is called with the key each
	// time a caller starts to wait for a flight.
	joined func(key string)
}

// OnJoin makes g call f with the key each time a caller starts to wait
// for a flight of it: a test's way to know a duplicate waits.
func (g *Group) OnJoin(f func(key string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joined = f
}

type flight struct {
	done chan struct{}
	v    any
	err  error
	// abandoned is true when the leader left no outcome to share (it
	// panicked, or its own context ended): the followers try again.
	abandoned bool
}

// Do runs fn for key unless a call of key is already running in this
// process; then it waits for that call and returns its outcome with shared
// true. A leader that panicked or whose own context ended with an error
// leaves no outcome: a waiter then tries again, and may lead. A waiter
// whose ctx ends returns ctx.Err() marked runtime.NotRun: it never ran fn.
func (g *Group) Do(ctx context.Context, key string, fn func() (any, error)) (v any, err error, shared bool) {
	for {
		g.mu.Lock()
		f, running := g.flights[key]
		if !running {
			if g.flights == nil {
				g.flights = map[string]*flight{}
			}
			f = &flight{done: make(chan struct{})}
			g.flights[key] = f
			g.mu.Unlock()
			v, err = g.lead(ctx, key, f, fn)
			return v, err, false
		}
		joined := g.joined
		g.mu.Unlock()
		if joined != nil {
			joined(key)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			// The waiter only waited: its call was not started here.
			return nil, runtime.NotRun(ctx.Err()), false
		}
		if !f.abandoned {
			return f.v, f.err, true
		}
	}
}

func (g *Group) lead(ctx context.Context, key string, f *flight, fn func() (any, error)) (v any, err error) {
	returned := false
	defer func() {
		f.v, f.err = v, err
		f.abandoned = !returned || (err != nil && ctx.Err() != nil)
		g.mu.Lock()
		delete(g.flights, key)
		g.mu.Unlock()
		close(f.done)
	}()
	v, err = fn()
	returned = true
	return v, err
}

// ErrLapsed is the cause with which a Hold's context ends when no renewal
// of its lease was confirmed in time: the lease may lapse, and another
// process may then claim the call.
var ErrLapsed = errors.New("the claim could not be renewed within lease_ttl (its store did not confirm a renewal in time), so it may have lapsed and another process may claim the call")

// Lost is what a holder knows of its claim when the store no longer has it
// under the holder's token (a renewal, a publish or a release finds it
// so): the store lost it (flushed, restarted empty, or it expired) or
// another holder took it over.
const Lost = "the claim is gone or held by another (the store lost it, or another process took it over)"

// Hold keeps a lease alive while its call runs (Renew).
type Hold struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	lapsed atomic.Bool
	// stopped is set by Stop: a lapse noticed after it is not one.
	stopped atomic.Bool
	stop    func()
}

// Context is the context the call runs under: the one given to Renew,
// ended with the cause ErrLapsed (context.Cause) once the lease may lapse.
func (h *Hold) Context() context.Context { return h.ctx }

// Lapsed reports whether the lease may have lapsed while it was held: no
// renewal was confirmed in time, or one found it taken over.
func (h *Hold) Lapsed() bool { return h.lapsed.Load() }

// Stop ends the renewals and waits for the one in flight to end (it is
// cancelled), so that none reaches the store after Stop returns; it then
// ends the Hold's context. Stop is idempotent.
func (h *Hold) Stop() { h.stop() }

// giveUp is how long before the lease's end, as the holder reckons it, the
// holder stops its call when no renewal was confirmed: time for the call to
// end before the store lets another process take the claim over.
func giveUp(ttl time.Duration) time.Duration { return ttl / 6 }

// Renew extends the lease (key, token) by ttl every third of ttl (no more
// often than every millisecond) until Stop. since is when the lease was
// asked for (before the claim was sent): the lease runs from no earlier
// than that, and from each renewal's sending on. A failed renewal is logged
// and tried again at the next third. When no renewal was confirmed by a
// sixth of ttl before the lease may end (each renewal is given up then), or
// one finds the lease taken over, the lease may lapse while the call runs:
// that is logged, Lapsed reports it and the Hold's context ends with the
// cause ErrLapsed, so that a call that honours it has stopped by the time
// another process can take the claim over. A lease granted so late that it
// may lapse already has so when Renew returns: its call must not start.
// layer prefixes the log messages, attrs are added to them.
func Renew(ctx context.Context, l runtime.Leaser, key string, token int64, ttl time.Duration, since time.Time, logger *slog.Logger, layer string, attrs ...any) *Hold {
	h := &Hold{}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	rctx, quit := context.WithCancel(context.WithoutCancel(ctx))
	lapse := func(msg string) {
		if !h.stopped.Load() && h.lapsed.CompareAndSwap(false, true) {
			logger.WarnContext(rctx, layer+": "+msg, attrs...)
			h.cancel(ErrLapsed)
		}
	}
	end := since.Add(ttl - giveUp(ttl))
	const late = "no renewal of the lease was confirmed in time; it may lapse while the call runs, and another process claim the call"
	if !time.Now().Before(end) {
		// The claim was granted too late to keep (a slow store): the
		// Hold's context has ended when Renew returns, before the call
		// could start.
		lapse(late)
	}
	watchdog := time.AfterFunc(time.Until(end), func() { lapse(late) })
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(max(ttl/3, time.Millisecond)) // a lease_ttl of a few ns must not panic
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			if h.Lapsed() {
				return
			}
			sent := time.Now()
			actx, cancel := context.WithDeadline(rctx, end)
			ok, err := l.Renew(actx, key, token, ttl)
			cancel()
			switch {
			case rctx.Err() != nil || h.Lapsed():
				return
			case err != nil:
				logger.WarnContext(rctx, layer+": renewing the lease failed", append(attrs, "error", err)...)
				continue
			case !ok:
				lapse(Lost + " while the call ran")
				return
			}
			end = sent.Add(ttl - giveUp(ttl))
			if !watchdog.Stop() {
				return // lapsed already
			}
			watchdog.Reset(time.Until(end))
		}
	}()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			h.stopped.Store(true)
			quit()
			<-ended
			watchdog.Stop() // after the renewer, which may have set it again
			h.cancel(nil)
		})
	}
	return h
}
