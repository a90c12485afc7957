package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func TestVirtualClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := runtime.NewVirtualClock(start)
	var fired []string
	c.AfterFunc(30*time.Millisecond, func() { fired = append(fired, "b") })
	c.AfterFunc(10*time.Millisecond, func() { fired = append(fired, "a") })
	stop := c.AfterFunc(20*time.Millisecond, func() { fired = append(fired, "stopped") })
	c.AfterFunc(30*time.Millisecond, func() { fired = append(fired, "c") })
	assert.True(t, stop(), "stop before the deadline cancels the call")
	assert.False(t, stop(), "a second stop reports nothing cancelled")

	wall := time.Now()
	require.NoError(t, c.Sleep(context.Background(), time.Hour))
	assert.Less(t, time.Since(wall), time.Second, "a virtual hour passes without waiting")
	assert.Equal(t, start.Add(time.Hour), c.Now())
	assert.Equal(t, []string{"a", "b", "c"}, fired, "callbacks run in deadline order, ties in registration order")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Sleep(ctx, time.Minute), context.Canceled)
	assert.Equal(t, start.Add(time.Hour), c.Now(), "a sleep on an ended context does not move the time")

	// A callback that ends the sleeper's context makes the sleep fail.
	actx, acancel := context.WithCancel(context.Background())
	c.AfterFunc(time.Second, acancel)
	assert.ErrorIs(t, c.Sleep(actx, time.Minute), context.Canceled)
}

func TestRealClock(t *testing.T) {
	var c runtime.RealClock
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Sleep(ctx, time.Hour), context.Canceled)
	assert.NoError(t, c.Sleep(context.Background(), 0))
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc never ran")
	}
}

// TestVirtualClockWokenActsFirst: when one sleeper wakes, a later sleeper
// does not move the time on before the woken goroutine had its grace; here
// the woken one cancels the later one, as a hedge cancels the racers that
// lost, so the later one never reaches its deadline.
func TestVirtualClockWokenActsFirst(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		c := runtime.NewVirtualClock(start)
		c.Grace = time.Second
		lateCtx, cancelLate := context.WithCancel(context.Background())
		late := make(chan error, 1)
		// A callback starts the late sleeper while the early one waits, as
		// a hedge's delay starts its backup.
		c.AfterFunc(time.Second, func() {
			go func() { late <- c.Sleep(lateCtx, 2*time.Minute) }()
		})
		require.NoError(t, c.Sleep(context.Background(), time.Minute))
		time.Sleep(5 * time.Millisecond) // the woken goroutine's work, in real time
		cancelLate()
		assert.ErrorIs(t, <-late, context.Canceled, "run %d: the woken sleeper cancelled the later one first", i)
		assert.Equal(t, start.Add(time.Minute), c.Now(), "run %d: the time did not move past the cancelled deadline", i)
	}
}

// TestVirtualClockSequentialSleepsDoNotWait: one goroutine sleeping again
// and again does not wait for any grace.
func TestVirtualClockSequentialSleepsDoNotWait(t *testing.T) {
	c := runtime.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c.Grace = time.Second
	wall := time.Now()
	for i := 0; i < 10; i++ {
		require.NoError(t, c.Sleep(context.Background(), time.Minute))
	}
	assert.Less(t, time.Since(wall), 500*time.Millisecond)
}
