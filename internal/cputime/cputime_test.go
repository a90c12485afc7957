package cputime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A function that sleeps takes wall time but almost no CPU time, and one
// that computes takes CPU time in proportion to its work.
func TestOfCountsCPUNotWaiting(t *testing.T) {
	slept := Of(func() { time.Sleep(50 * time.Millisecond) })
	if _, ok := threadTime(); ok {
		assert.Less(t, slept, 20*time.Millisecond, "sleeping is not CPU time")
	} else {
		assert.GreaterOrEqual(t, slept, 50*time.Millisecond, "without a thread clock, the wall time")
	}
	sink := 0
	work := func(n int) func() {
		return func() {
			for i := range n {
				sink += i % 7
			}
		}
	}
	small := Of(work(1 << 20))
	large := Of(work(1 << 24))
	assert.Greater(t, large, small, "sixteen times the work takes longer")
	assert.NotZero(t, sink)
}
