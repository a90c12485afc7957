package lease

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// Group collapses concurrent calls of one key in this process: one leads,
// the others wait for its outcome. The zero Group is ready to use.
type Group struct {
	mu      sync.Mutex
	flights map[string]*flight
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
// whose ctx ends returns ctx.Err().
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
		g.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err(), false
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

// Renew extends the lease (key, token) by ttl every third of ttl (no more
// often than every millisecond) until the returned stop is called; stop is
// idempotent and waits for the renewer to end. A failed renewal is logged and tried again at the next tick; a lease
// found taken over is logged and no longer renewed. layer prefixes the log
// messages, attrs are added to them.
func Renew(ctx context.Context, l runtime.Leaser, key string, token int64, ttl time.Duration, logger *slog.Logger, layer string, attrs ...any) (stop func()) {
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(max(ttl/3, time.Millisecond)) // a lease_ttl of a few ns must not panic
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			ok, err := l.Renew(ctx, key, token, ttl)
			if err != nil {
				logger.WarnContext(ctx, layer+": renewing the lease failed", append(attrs, "error", err)...)
				continue
			}
			if !ok {
				logger.WarnContext(ctx, layer+": the lease was taken over while the call ran", attrs...)
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-ended
	}
}
