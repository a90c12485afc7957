package idempotent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/runtime"
)

// publishBackoff is the wait before a result whose publish failed is sent
// again the first time; it doubles with each failure, up to
// publishBackoffMax and never beyond a third of lease_ttl, so that the
// claim is renewed in time meanwhile.
const (
	publishBackoff    = 100 * time.Millisecond
	publishBackoffMax = 10 * time.Second
)

// publishRetryFor bounds how long a result is sent again (and its claim
// held) while the store fails (never beyond ttl): duplicates wait for the
// claim meanwhile, and find it in doubt after.
const publishRetryFor = 10 * time.Minute

// maxRepublishes bounds the results of a layer waiting to be sent again,
// each with its goroutine: a store that fails under a burst of calls
// starts no more. A result beyond it is not sent again: its claim is in
// doubt once its lease expires, as when the layer is closing.
const maxRepublishes = 256

// cleanupPublishTimeout bounds the last attempt Cleanup makes to publish
// the results still waiting.
const cleanupPublishTimeout = 2 * time.Second

// republishes are the results of a layer waiting to be published again;
// the zero value is ready to use.
type republishes struct {
	mu     sync.Mutex
	closed bool
	n      int             // results waiting
	stop   context.Context // ends at Cleanup
	end    context.CancelFunc
	wg     sync.WaitGroup
}

// add counts one more result waiting and returns the context that ends at
// Cleanup; why it does not once the layer is cleaned up or maxRepublishes
// results wait. done counts it no more.
func (r *republishes) add() (stop context.Context, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, "as the layer was closing"
	case r.n >= maxRepublishes:
		return nil, fmt.Sprintf("and %d results already wait to be sent again", r.n)
	}
	if r.stop == nil {
		r.stop, r.end = context.WithCancel(context.Background())
	}
	r.n++
	r.wg.Add(1)
	return r.stop, ""
}

// done counts a result waiting no more.
func (r *republishes) done() {
	r.mu.Lock()
	r.n--
	r.mu.Unlock()
	r.wg.Done()
}

// close ends the waits of the results still waiting, which are then sent
// once more, and waits for them.
func (r *republishes) close() {
	r.mu.Lock()
	r.closed = true
	if r.end != nil {
		r.end()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// Cleanup implements runtime.CleanerUpper: the results still waiting to be
// published are sent once more, within cleanupPublishTimeout, before the
// pipeline closes its stores; the claim of one that fails then is in doubt
// once its lease expires.
func (m *Idempotent) Cleanup() error {
	m.republishes.close()
	return nil
}

// CleansUpConcurrently implements runtime.ConcurrentCleaner: the close
// waits for the results of every idempotent layer (and the settlements of
// every meter) at once, rather than layer after layer.
func (m *Idempotent) CleansUpConcurrently() {}

// republish sends res again as the outcome of key under token, in the
// background, after its publish failed (the store may have applied it: a
// repeat by the token that published it is answered true): with a
// doubling wait (publishBackoff up to publishBackoffMax, within a third of
// lease_ttl), renewing the claim after each failure, so that a duplicate
// waits for the result instead of finding the call in doubt when the
// lease expires. It stops once the result is published, or once the claim
// is gone or held by another (fenced out: nothing is written over it), or
// after publishRetryFor (the claim is then ended in doubt, if the store
// takes it), or at Cleanup after one more attempt. At most maxRepublishes
// results of the layer wait so at once.
func (m *Idempotent) republish(ctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, res []byte) {
	ctx = context.WithoutCancel(ctx)
	// The call is reused once it returns: what the background needs of
	// it is taken now.
	c = &runtime.ToolCall{Name: c.Name, Meta: runtime.Meta{IdempotencyKey: c.IdempotencyKey()}}
	attrs := []any{"tool", c.Name, "idempotency_key", c.IdempotencyKey()}
	stop, why := m.republishes.add()
	if stop == nil {
		m.logger.WarnContext(ctx, "idempotent: storing the result failed "+why+"; a duplicate finds the call in doubt once the lease expires", attrs...)
		return
	}
	leaseTTL := m.LeaseTTL.D()
	until := m.clock.Now().Add(min(publishRetryFor, m.TTL.D()))
	go func() {
		defer m.republishes.done()
		third := max(leaseTTL/3, time.Millisecond)
		backoff := min(publishBackoff, third)
		wait := backoff // the wait before the next send
		for {
			last := m.clock.Sleep(stop, wait) != nil
			pctx, cancel := ctx, context.CancelFunc(func() {})
			if last {
				pctx, cancel = context.WithTimeout(ctx, cleanupPublishTimeout)
			}
			ok, err := l.Publish(pctx, key, token, res, m.TTL.D())
			cancel()
			// The wait doubles with each failure.
			backoff = min(2*backoff, publishBackoffMax, third)
			var earlier *earlierKeyError
			switch {
			case err == nil && ok:
				m.logger.InfoContext(ctx, "idempotent: the result is stored, sent again after its store failed", attrs...)
				return
			case errors.As(err, &earlier):
				// Stored under key: sent again, only the earlier build's
				// key would be, and a repeat is answered true there.
				m.earlierKeyFailed(ctx, c, earlier)
				return
			case err == nil:
				m.logger.WarnContext(ctx, "idempotent: "+lease.Lost+" since the call ran; the result is not stored", attrs...)
				return
			case last:
				m.logger.WarnContext(ctx, "idempotent: storing the result failed again as the layer was closing; a duplicate finds the call in doubt once the lease expires",
					append(attrs, "error", err)...)
				return
			case m.clock.Now().Add(backoff).After(until):
				m.doubt(ctx, l, c, key, token, "ran, but its result could not be stored within "+publishRetryFor.String(), "error", err)
				return
			}
			// Keep the claim while the store fails. A renewal that finds
			// it no longer held is followed at once by a publish, which
			// tells a claim published by an attempt whose answer was lost
			// (true) from one gone or taken over (false); once, so that a
			// store that keeps failing publishes is not sent them with no
			// wait between.
			atOnce := wait > 0
			wait = backoff
			if renewed, rerr := l.Renew(ctx, key, token, leaseTTL); rerr == nil && !renewed && atOnce {
				wait = 0
			}
		}
	}()
}
