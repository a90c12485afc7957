package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestMemoryRateLimiterClockSteppedBack: a clock stepped back by two hours
// (a host's injected clock set back, a VM restored) does not hold the
// bucket for two hours: it owes what it owed before the step, one interval
// for a limit of 2 per minute used up, and refills as before.
func TestMemoryRateLimiterClockSteppedBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := runtime.NewMemoryRateLimiter()
	runtime.SetMemoryRateLimiterClock(r, func() time.Time { return now })
	interval := 30 * time.Second // 2 per minute
	for range 2 {
		_, ok, err := r.Allow(ctx, "k", interval, 2, 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	wait, ok, err := r.Allow(ctx, "k", interval, 2, 0)
	require.NoError(t, err)
	require.False(t, ok, "the burst is used up")
	assert.Equal(t, interval, wait)

	now = now.Add(-2 * time.Hour)
	wait, ok, err = r.Allow(ctx, "k", interval, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok, "still used up after the step")
	assert.Equal(t, interval, wait, "the wait is what it was, not the step as well")

	now = now.Add(interval)
	_, ok, err = r.Allow(ctx, "k", interval, 2, 0)
	require.NoError(t, err)
	assert.True(t, ok, "one interval after the step, a call passes")
	wait, ok, err = r.Allow(ctx, "k", interval, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, interval, wait)
}
