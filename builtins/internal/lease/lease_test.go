package lease_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/runtime"
)

// joins returns a channel closed once n callers wait for a flight of g.
func joins(g *lease.Group, n int64) <-chan struct{} {
	all := make(chan struct{})
	var waiting atomic.Int64
	lease.OnJoin(g, func(string) {
		if waiting.Add(1) == n {
			close(all)
		}
	})
	return all
}

func TestGroupSharesTheLeadersOutcome(t *testing.T) {
	var g lease.Group
	var runs atomic.Int64
	release := make(chan struct{})
	followers := joins(&g, 7)
	var wg sync.WaitGroup
	var shared atomic.Int64
	for range 8 {
		wg.Go(func() {
			v, err, sh := g.Do(context.Background(), "k", func() (any, error) {
				runs.Add(1)
				<-release
				return "v", errors.New("boom")
			})
			assert.Equal(t, "v", v)
			assert.EqualError(t, err, "boom", "the leader's error is shared too")
			if sh {
				shared.Add(1)
			}
		})
	}
	<-followers // the seven others wait for the leader
	close(release)
	wg.Wait()
	assert.Equal(t, int64(1), runs.Load())
	assert.Equal(t, int64(7), shared.Load())
}

func TestGroupFollowersRetryWhenTheLeaderIsCancelled(t *testing.T) {
	var g lease.Group
	leaderCtx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, err, _ := g.Do(leaderCtx, "k", func() (any, error) {
			close(started)
			<-leaderCtx.Done()
			return nil, leaderCtx.Err()
		})
		leaderDone <- err
	}()
	<-started
	following := joins(&g, 1)
	followerDone := make(chan any, 1)
	go func() {
		v, err, shared := g.Do(context.Background(), "k", func() (any, error) { return "mine", nil })
		assert.NoError(t, err)
		assert.False(t, shared, "the follower led the second attempt")
		followerDone <- v
	}()
	<-following // the follower waits for the leader
	cancel()
	require.ErrorIs(t, <-leaderDone, context.Canceled)
	assert.Equal(t, "mine", <-followerDone, "a cancelled leader's error is not shared")
}

func TestGroupWaiterHonoursItsContext(t *testing.T) {
	var g lease.Group
	release, leading := make(chan struct{}), make(chan struct{})
	defer close(release)
	go g.Do(context.Background(), "k", func() (any, error) { close(leading); <-release; return nil, nil })
	<-leading
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err, _ := g.Do(ctx, "k", func() (any, error) { return nil, nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, runtime.DidNotRun(err), "a waiter never ran fn")
}

// renewals is a Leaser that records each renewal and, right after one
// succeeded, what another caller's Acquire then finds.
type renewals struct {
	*runtime.KVLeaser
	mu      sync.Mutex
	at      []time.Time
	held    []runtime.LeaseGrant
	renewed chan struct{}
}

func (r *renewals) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (bool, error) {
	ok, err := r.KVLeaser.Renew(ctx, key, token, ttl)
	if !ok || err != nil {
		return ok, err
	}
	other, err := r.Acquire(ctx, key, ttl, time.Hour, true)
	r.mu.Lock()
	r.at = append(r.at, time.Now())
	r.held = append(r.held, other)
	r.mu.Unlock()
	select {
	case r.renewed <- struct{}{}:
	default:
	}
	return ok, err
}

func (r *renewals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}

// The lease is renewed past its first expiry, each renewal leaving it held
// against another caller, until stop; then it expires. The test waits for
// renewals rather than sleeping a fixed time, so a loaded machine that runs
// the ticker late makes it slower, not failed.
func TestRenewKeepsTheLeaseUntilStopped(t *testing.T) {
	l := &renewals{KVLeaser: runtime.NewKVLeaser(runtime.NewMemoryKV()), renewed: make(chan struct{}, 1)}
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	acquired := time.Now()
	g, err := l.Acquire(ctx, "k", ttl, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	h := lease.Renew(ctx, l, "k", g.Token, ttl, acquired, discard, "test")
	stop := h.Stop
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		past := len(l.at) >= 3 && l.at[len(l.at)-1].Sub(acquired) > ttl
		l.mu.Unlock()
		if past {
			break
		}
		select {
		case <-l.renewed:
		case <-deadline:
			stop()
			t.Fatalf("not three renewals, the last past the first expiry, within a minute (%d renewals)", l.count())
		}
	}
	stop()
	stop() // idempotent
	assert.False(t, h.Lapsed())
	assert.ErrorIs(t, h.Context().Err(), context.Canceled, "its context ends with it")
	assert.NotErrorIs(t, context.Cause(h.Context()), lease.ErrLapsed)
	n := l.count()
	for i, other := range l.held {
		assert.Equal(t, runtime.LeaseHeld, other.Status, "renewal %d left the lease held", i+1)
		assert.Positive(t, other.Remaining, "renewal %d", i+1)
	}
	time.Sleep(2 * ttl)
	assert.Equal(t, n, l.count(), "no renewal once stop returned")
	other, err := l.Acquire(ctx, "k", ttl, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseAcquired, other.Status, "expired once no longer renewed")
	assert.True(t, other.InDoubt)

	tiny := lease.Renew(ctx, l, "k", other.Token, time.Nanosecond, time.Now(), discard, "test")
	time.Sleep(5 * time.Millisecond)
	tiny.Stop() // a tiny ttl renews every millisecond instead of panicking
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// stalled is a Leaser whose renewals hang until their context ends, or
// answer that the lease was taken over (takenOver).
type stalled struct {
	*runtime.KVLeaser
	takenOver bool
	entered   chan struct{} // receives when a renewal starts
	ended     chan error    // receives the context error a renewal ended with
}

func newStalled() *stalled {
	return &stalled{KVLeaser: runtime.NewKVLeaser(runtime.NewMemoryKV()), entered: make(chan struct{}, 8), ended: make(chan error, 8)}
}

func (s *stalled) Renew(ctx context.Context, _ string, _ int64, _ time.Duration) (bool, error) {
	s.entered <- struct{}{}
	if s.takenOver {
		return false, nil
	}
	<-ctx.Done()
	s.ended <- ctx.Err()
	return false, ctx.Err()
}

func (s *stalled) acquire(t *testing.T, ttl time.Duration) (int64, time.Time) {
	asked := time.Now()
	g, err := s.Acquire(context.Background(), "k", ttl, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	return g.Token, asked
}

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the hold's context did not end within a minute")
	}
}

// A renewal that stalls past the lease ends the holder's context, with the
// cause ErrLapsed, while the lease still holds against another caller: the
// call can stop before another process takes the claim over. The stalled
// renewal is given up then.
func TestRenewStopsTheCallBeforeAStalledLeaseLapses(t *testing.T) {
	l := newStalled()
	// The context ends a sixth of ttl before the lease: 500 ms for the
	// check below to run in (200 ms was overrun on a loaded machine).
	const ttl = 3 * time.Second
	token, asked := l.acquire(t, ttl)
	h := lease.Renew(context.Background(), l, "k", token, ttl, asked, discard, "test")
	defer h.Stop()
	waitDone(t, h.Context())
	other, err := l.Acquire(context.Background(), "k", ttl, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, other.Status, "the call is stopped before the lease lapses")
	assert.ErrorIs(t, context.Cause(h.Context()), lease.ErrLapsed)
	assert.True(t, h.Lapsed())
	assert.ErrorIs(t, <-l.ended, context.DeadlineExceeded, "the stalled renewal was given up")
}

// A renewal that finds the lease taken over ends the holder's context at
// once.
func TestRenewStopsTheCallWhenTheLeaseIsTakenOver(t *testing.T) {
	l := newStalled()
	l.takenOver = true
	const ttl = 600 * time.Millisecond
	token, asked := l.acquire(t, ttl)
	h := lease.Renew(context.Background(), l, "k", token, ttl, asked, discard, "test")
	defer h.Stop()
	waitDone(t, h.Context())
	assert.ErrorIs(t, context.Cause(h.Context()), lease.ErrLapsed)
	assert.True(t, h.Lapsed())
	assert.Len(t, l.entered, 1, "no renewal once the lease was found taken over")
}

// Stop returns while a renewal stalls: it cancels the renewal in flight
// and waits for it, so no renewal reaches the store after it.
func TestStopCancelsAStalledRenewal(t *testing.T) {
	l := newStalled()
	const ttl = 600 * time.Millisecond // a renewal at 200ms, given up at 500ms
	token, asked := l.acquire(t, ttl)
	h := lease.Renew(context.Background(), l, "k", token, ttl, asked, discard, "test")
	<-l.entered
	h.Stop()
	assert.Len(t, l.ended, 1, "the renewal in flight ended before Stop returned")
	assert.ErrorIs(t, <-l.ended, context.Canceled)
	assert.False(t, h.Lapsed(), "stopped, not lapsed")
}
