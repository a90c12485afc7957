package ssetest

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadClock returns a clock of the CPU time of the calling thread, and a
// func that releases the thread: on a loaded machine it counts the work of
// a run, not the time it waited for a core. The caller's goroutine is
// locked to its thread until release.
func threadClock() (now func() time.Duration, release func()) {
	runtime.LockOSThread()
	return func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			panic(err)
		}
		return time.Duration(ts.Nano())
	}, runtime.UnlockOSThread
}
