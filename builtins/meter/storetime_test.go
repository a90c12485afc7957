package meter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// slowClock is a store whose time reads take 200 ms to fail once it is
// down, as a store's do at its timeout.
type slowClock struct {
	runtime.StoreClock
	down  atomic.Bool
	reads atomic.Int64
}

func (s *slowClock) StoreIDAt(ctx context.Context) (string, time.Time, error) {
	s.reads.Add(1)
	if s.down.Load() {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		return "", time.Time{}, errors.New("store down")
	}
	return "id", time.Now().Add(time.Hour), nil
}

// TestStoreTimeReadsOnceWithoutHoldingCalls: the store's time was read
// under the lock every call takes, so while the store failed each call
// waited for the reads of all the calls before it (ten calls with a 300 ms
// deadline took 2 s, eleven reads) / one read is under way at a time,
// outside the lock: the others use the last offset, and a failed read is
// not tried again for a second.
func TestStoreTimeReadsOnceWithoutHoldingCalls(t *testing.T) {
	clk := runtime.NewVirtualClock(time.Now())
	store := &slowClock{}
	st := storeTime{clock: clk, store: store}
	first, err := st.now(context.Background())
	require.NoError(t, err)
	assert.WithinDuration(t, clk.Now().Add(time.Hour), first, time.Minute, "the store's clock, not the replica's")

	clk.Advance(2 * time.Minute)
	store.down.Store(true)
	var wg sync.WaitGroup
	var worst atomic.Int64
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			now, err := st.now(ctx)
			took := time.Since(start)
			for {
				w := worst.Load()
				if int64(took) <= w || worst.CompareAndSwap(w, int64(took)) {
					break
				}
			}
			if assert.NoError(t, err, "the last offset serves while the store cannot be read") {
				assert.WithinDuration(t, clk.Now().Add(time.Hour), now, time.Minute)
			}
		}()
	}
	wg.Wait()
	assert.Less(t, time.Duration(worst.Load()), 290*time.Millisecond, "no call waits past one read")
	assert.Equal(t, int64(2), store.reads.Load(), "one read for the ten calls")

	// Never measured: a call waits for the read under way, as long as its
	// context lets it, and then fails with the read's error until a second
	// has passed.
	cold := storeTime{clock: clk, store: store}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() { _, _ = cold.now(context.Background()) }()
	require.Eventually(t, func() bool { return store.reads.Load() == 3 }, 5*time.Second, time.Millisecond)
	_, err = cold.now(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool {
		cold.mu.Lock()
		defer cold.mu.Unlock()
		return cold.err != nil
	}, 5*time.Second, time.Millisecond)
	_, err = cold.now(context.Background())
	assert.ErrorContains(t, err, "store down")
	assert.Equal(t, int64(3), store.reads.Load(), "a failed read is not tried again at once")
	clk.Advance(2 * time.Second)
	store.down.Store(false)
	_, err = cold.now(context.Background())
	assert.NoError(t, err)
}

// steppedClock is the real clock of a host whose wall clock steps (an NTP
// step): its readings carry a monotonic reading that moves only with
// Advance, and a wall time that Step moves as well.
type steppedClock struct {
	runtime.RealClock
	mu            sync.Mutex
	base          time.Time
	elapsed, step time.Duration
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return wallStepped(c.base.Add(c.elapsed), c.step)
}

// truth is the time that has really passed, without the steps.
func (c *steppedClock) truth() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(c.elapsed).Round(0)
}

func (c *steppedClock) Advance(d time.Duration) { c.mu.Lock(); c.elapsed += d; c.mu.Unlock() }
func (c *steppedClock) Step(d time.Duration)    { c.mu.Lock(); c.step += d; c.mu.Unlock() }

// wallStepped returns t, a reading of the real clock, with its wall time
// moved by whole seconds d and its monotonic reading kept: what time.Now
// returns after the host's clock stepped by d.
func wallStepped(t time.Time, d time.Duration) time.Time {
	rep := (*struct {
		wall uint64
		ext  int64
		loc  *time.Location
	})(unsafe.Pointer(&t))
	if rep.wall>>63 == 0 {
		panic("not a reading of the real clock")
	}
	rep.wall = uint64(int64(rep.wall) + int64(d/time.Second)<<30)
	return t
}

// storeAhead is a store whose clock is an hour ahead of the true time.
type storeAhead struct {
	runtime.StoreClock
	clock *steppedClock
	down  atomic.Bool
	reads atomic.Int64
}

func (s *storeAhead) StoreIDAt(context.Context) (string, time.Time, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return "", time.Time{}, errors.New("store down")
	}
	return "id", s.clock.truth().Add(time.Hour), nil
}

// TestStoreTimeFollowsAStepOfTheWallClock: the store's time was the
// pipeline's clock plus the offset last measured, the offset renewed after
// a minute on the monotonic clock, so for up to a minute after the host's
// wall clock stepped (NTP) calls were charged to the window of the stepped
// time / the store's time is its last reading plus the time elapsed since
// (monotonic), and a step of the wall clock beyond a second makes the next
// call read the store's time again.
func TestStoreTimeFollowsAStepOfTheWallClock(t *testing.T) {
	base := time.Now()
	require.NotEqual(t, base, base.Round(0), "the real clock's readings are monotonic")
	clk := &steppedClock{base: base}
	store := &storeAhead{clock: clk}
	st := storeTime{clock: clk, store: store}
	first, err := st.now(context.Background())
	require.NoError(t, err)
	assert.WithinDuration(t, clk.truth().Add(time.Hour), first, time.Millisecond)

	for i, step := range []time.Duration{30 * time.Second, -45 * time.Second, 10 * time.Minute} {
		clk.Advance(5 * time.Second)
		clk.Step(step)
		now, err := st.now(context.Background())
		require.NoError(t, err)
		assert.WithinDuration(t, clk.truth().Add(time.Hour), now, time.Millisecond, "a step of %s", step)
		assert.Equal(t, int64(2+i), store.reads.Load(), "a step of %s reads the store's time again", step)
		assert.WithinDuration(t, clk.truth().Add(time.Hour), st.last(), time.Millisecond)
	}

	// A read that fails after a step leaves the time elapsed right.
	clk.Advance(5 * time.Second)
	store.down.Store(true)
	clk.Step(-2 * time.Minute)
	now, err := st.now(context.Background())
	require.NoError(t, err)
	assert.WithinDuration(t, clk.truth().Add(time.Hour), now, time.Millisecond)
	assert.WithinDuration(t, clk.truth().Add(time.Hour), st.last(), time.Millisecond)

	// Time that passes without a step reads the store only once a minute.
	store.down.Store(false)
	clk.Advance(2 * time.Second)
	_, err = st.now(context.Background())
	require.NoError(t, err)
	reads := store.reads.Load()
	clk.Advance(30 * time.Second)
	now, err = st.now(context.Background())
	require.NoError(t, err)
	assert.WithinDuration(t, clk.truth().Add(time.Hour), now, time.Millisecond)
	assert.Equal(t, reads, store.reads.Load())
}
