package dsl

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// MaxAbandoned is how many CUE evaluations that overran their deadline may
// still be running in the process. CUE cannot be interrupted: an evaluation
// past its deadline is abandoned to finish on its own, and while
// MaxAbandoned of them are still running, Load and LoadData refuse new work
// with ErrEvaluationBusy instead of piling up more.
const MaxAbandoned = 2

// ErrEvaluationBusy is returned (as a diagnostic by Load) while
// MaxAbandoned evaluations that overran their deadline are still running.
var ErrEvaluationBusy = fmt.Errorf("%d earlier CUE evaluations that overran their deadline are still running; try again later", MaxAbandoned)

var errDeadline = errors.New("deadline exceeded")

// abandoned counts evaluations past their deadline that have not returned.
var abandoned atomic.Int32

// withDeadline runs f on its own goroutine and waits at most timeout for it.
// It returns nil when f returned, errDeadline when the timeout passed first,
// ctx.Err() when ctx ended first, and ErrEvaluationBusy without running f
// when too many earlier calls are still running past their deadline. Once
// withDeadline has returned an error, f's results must not be read.
func withDeadline(ctx context.Context, timeout time.Duration, f func()) error {
	if abandoned.Load() >= MaxAbandoned {
		return ErrEvaluationBusy
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	var gaveUp atomic.Bool
	go func() {
		defer func() {
			if gaveUp.Swap(false) {
				abandoned.Add(-1)
			}
			close(done)
		}()
		f()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case <-done:
		return nil
	case <-timer.C:
		err = errDeadline
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Count f as abandoned unless it finished meanwhile.
	abandoned.Add(1)
	gaveUp.Store(true)
	select {
	case <-done:
		if gaveUp.Swap(false) {
			abandoned.Add(-1)
		}
		return nil
	default:
	}
	return err
}
