package memoize

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/chatcache"
	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/runtime"
)

// flightClaim is a leader's claim: its lease's token (0: no claim) and
// when the lease was asked for.
type flightClaim struct {
	token int64
	asked time.Time
}

// claim finds key in the store's lease records: the cached value (a hit),
// or the lease to compute it under (a token > 0). A claim held elsewhere is
// waited for until it holds a value, is released, or expires (its holder
// died), and is then taken over. A store that cannot be asked is logged and
// reported as a miss without a lease (token 0): memoize fails open. Only
// the end of ctx is an error.
func (m *Memoize) claim(ctx context.Context, key string) (hit []byte, c flightClaim, err error) {
	d := m.pollMin
	for {
		asked := time.Now() // the lease runs from no earlier than this
		g, err := m.leaser.Acquire(ctx, key, m.LeaseTTL.D(), m.TTL.D(), true)
		if err != nil {
			if ctx.Err() != nil {
				return nil, flightClaim{}, ctx.Err()
			}
			m.logger.WarnContext(ctx, "memoize store unavailable; running the call without single flight", "error", err)
			return nil, flightClaim{}, nil
		}
		switch g.Status {
		case runtime.LeaseDone:
			return g.Result, flightClaim{}, nil
		case runtime.LeaseAcquired:
			if g.InDoubt {
				m.logger.InfoContext(ctx, "memoize: the leader of this call stopped without a result; running it here")
			}
			return nil, flightClaim{token: g.Token, asked: asked}, nil
		case runtime.LeaseInDoubt: // a leaser that ignores takeover: run unclaimed
			return nil, flightClaim{}, nil
		}
		if err := m.clock.Sleep(ctx, min(d, max(g.Remaining, m.pollMin))); err != nil {
			return nil, flightClaim{}, err
		}
		d = min(2*d, m.pollMax)
	}
}

// finish publishes the leader's result under its lease, or releases the
// lease when there is no result to share (failure, a value that does not
// encode). Store failures are logged: waiters then run the call once the
// lease is released or expires.
func (m *Memoize) finish(ctx context.Context, key string, token int64, result any, ok bool) {
	if token == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var b []byte
	if ok {
		var err error
		if b, err = json.Marshal(result); err != nil {
			m.logger.DebugContext(ctx, "memoize: result does not encode as JSON; not cached", "error", err)
			ok = false
		}
	}
	if !ok {
		if err := m.leaser.Release(ctx, key, token); err != nil {
			m.logger.WarnContext(ctx, "memoize: releasing the claim failed; waiters run the call once it expires", "error", err)
		}
		return
	}
	published, err := m.leaser.Publish(ctx, key, token, b, m.TTL.D())
	switch {
	case err != nil:
		m.logger.WarnContext(ctx, "memoize store write failed; result not cached", "error", err)
	case !published:
		m.logger.WarnContext(ctx, "memoize: the claim was lost while the call ran (it outlived lease_ttl without renewal); the result is not cached")
	}
}

// lead runs the call under its claim (token 0: without one), renewing the
// claim while it runs, and returns what run returns. A claim that may
// lapse (no renewal confirmed in time) does not stop the call: a cache
// fails open, and stopping it would not spare the call another process
// then makes; its result is cached only if the claim still holds.
func (m *Memoize) lead(ctx context.Context, key string, c flightClaim, run func() (any, bool, error)) (any, error) {
	token := c.token
	if token == 0 {
		v, _, err := run()
		return v, err
	}
	hold := lease.Renew(ctx, m.leaser, key, token, m.LeaseTTL.D(), c.asked, m.logger, "memoize")
	finished := false
	defer func() {
		hold.Stop()
		if !finished { // the call panicked: release the claim
			m.finish(ctx, key, token, nil, false)
		}
	}()
	v, ok, err := run()
	hold.Stop()
	finished = true
	m.finish(ctx, key, token, v, ok && err == nil)
	return v, err
}

// toolFlight serves a tool call with single flight: concurrent identical
// calls in this process share one leader, which finds the result in the
// store, waits for it, or computes it under a lease.
func (m *Memoize) toolFlight(ctx context.Context, c *runtime.ToolCall, key string, next runtime.ToolHandler) (any, error) {
	type outcome struct {
		v      any
		cached bool
	}
	o, err, shared := m.flights.Do(ctx, key, func() (any, error) {
		hit, claim, err := m.claim(ctx, key)
		if err != nil {
			return nil, err
		}
		if hit != nil {
			if v, ok := m.value(ctx, hit); ok {
				return outcome{v, true}, nil
			}
		}
		v, err := m.lead(ctx, key, claim, func() (any, bool, error) {
			v, err := next(ctx, c)
			return v, true, err
		})
		return outcome{v, false}, err
	})
	out, _ := o.(outcome)
	if err == nil && (shared || out.cached) {
		c.Meta.Cached = true
	}
	return out.v, err
}

// chatFlight serves a chat call with single flight. The leader streams to
// its own caller while it records; the callers that waited for it replay
// the recorded entry. A leader that leaves no entry (its consumer stopped
// reading) sends its waiters to the store again.
func (m *Memoize) chatFlight(ctx context.Context, c *runtime.ChatCall, key string, next runtime.ChatHandler, yield func(runtime.Delta) bool) error {
	for {
		led := false
		v, err, shared := m.flights.Do(ctx, key, func() (any, error) {
			led = true
			return m.chatLead(ctx, c, key, next, yield)
		})
		if err != nil || led {
			return err
		}
		if !shared {
			continue
		}
		switch v := v.(type) {
		case *chatcache.Entry:
			if v != nil {
				chatcache.Replay(c, v, m.random, yield)
				return nil
			}
		case unkept:
			// The leader's answer calls a tool whose calls are not
			// kept: this one likely does too. Each waiter asks the model
			// at once rather than after the one before it (its answer
			// is relayed, not stored: the next request leads again).
			_, err := chatcache.Record(ctx, c, next, yield)
			return err
		}
	}
}

// unkept is what a chat flight's leader shares when its answer is not kept
// (Memoize.keeps): its waiters ask the model, each for its own.
type unkept struct{}

// chatLead replays the stored entry of key, waits for it, or records it
// under a lease; it returns the entry (nil when the response is not
// cacheable).
func (m *Memoize) chatLead(ctx context.Context, c *runtime.ChatCall, key string, next runtime.ChatHandler, yield func(runtime.Delta) bool) (any, error) {
	hit, claim, err := m.claim(ctx, key)
	if err != nil {
		return nil, err
	}
	if hit != nil {
		if e := m.entry(ctx, hit); e != nil {
			chatcache.Replay(c, e, m.random, yield)
			return e, nil
		}
	}
	v, err := m.lead(ctx, key, claim, func() (any, bool, error) {
		e, err := chatcache.Record(ctx, c, next, yield)
		return e, e != nil && m.keeps(e), err
	})
	// An answer that is not kept (keeps) is not shared either: each caller
	// that waited asks the model for its own, at once (unkept).
	e, _ := v.(*chatcache.Entry)
	switch {
	case e == nil:
		return nil, err
	case !m.keeps(e):
		return unkept{}, err
	}
	return e, nil
}
