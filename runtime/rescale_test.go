package runtime_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
)

// TestRescaleTAT: the calls a bucket owes are kept in number across a
// change of interval, rounded up, and a product past the range of a
// duration is held at its end instead of wrapping around.
func TestRescaleTAT(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	assert.Equal(t, at(3*time.Minute), runtime.RescaleTAT(at(3*time.Hour), now, time.Hour, time.Minute))
	assert.Equal(t, at(3*time.Hour), runtime.RescaleTAT(at(3*time.Minute), now, time.Minute, time.Hour))
	assert.Equal(t, at(2), runtime.RescaleTAT(at(1), now, 3, 4), "rounded up")
	assert.Equal(t, at(time.Hour), runtime.RescaleTAT(at(time.Hour), now, 0, time.Minute), "no interval recorded")
	assert.Equal(t, at(-time.Hour), runtime.RescaleTAT(at(-time.Hour), now, time.Hour, time.Minute), "a bucket full again")
	assert.Equal(t, at(time.Duration(math.MaxInt64)), runtime.RescaleTAT(at(1000*time.Hour), now, time.Nanosecond, 720*time.Hour))
}
