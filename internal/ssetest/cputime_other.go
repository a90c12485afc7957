//go:build !linux

package ssetest

import "time"

// threadClock returns the wall clock where the thread's CPU time is not
// at hand.
func threadClock() (now func() time.Duration, release func()) {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }, func() {}
}
