package meter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
