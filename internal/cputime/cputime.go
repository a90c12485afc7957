// Package cputime measures the CPU time a function takes on the calling
// goroutine's thread, for the tests that compare the cost of two readings
// (a text four times as long read in under six times the time): the wall
// clock also counts the time the thread waited while other processes ran,
// which on a loaded machine can make a linear reading look quadratic, and
// thread CPU time does not. Where the system offers no thread clock, Of
// measures the wall time.
package cputime

import (
	"runtime"
	"time"
)

// Of runs f on the calling goroutine, locked to its thread, and returns the
// CPU time the thread spent in it. Work f hands to other goroutines, and
// the collector's background workers, are not counted.
func Of(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadTime()
	if !ok {
		t := time.Now()
		f()
		return time.Since(t)
	}
	f()
	end, _ := threadTime()
	return end - start
}
