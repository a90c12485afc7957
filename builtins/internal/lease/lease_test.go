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

func TestGroupSharesTheLeadersOutcome(t *testing.T) {
	var g lease.Group
	var runs atomic.Int64
	release := make(chan struct{})
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
	time.Sleep(50 * time.Millisecond)
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
	followerDone := make(chan any, 1)
	go func() {
		v, err, shared := g.Do(context.Background(), "k", func() (any, error) { return "mine", nil })
		assert.NoError(t, err)
		assert.False(t, shared, "the follower led the second attempt")
		followerDone <- v
	}()
	time.Sleep(20 * time.Millisecond)
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
	stop := lease.Renew(ctx, l, "k", g.Token, ttl, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
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

	tiny := lease.Renew(ctx, l, "k", other.Token, time.Nanosecond, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	time.Sleep(5 * time.Millisecond)
	tiny() // a tiny ttl renews every millisecond instead of panicking
}
