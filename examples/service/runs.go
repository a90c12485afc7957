package main

import (
	"fmt"
	"sync"
	"time"
)

// defaultMaxRuns bounds the named runs the service keeps open at once.
const defaultMaxRuns = 10000

// runTracker bounds the named runs (X-Run-ID) the service keeps open: the
// pipeline keeps per-run state (a meter's ledger, the idempotency records
// of the run's calls) for each until the run is ended or has been idle for
// settings.run_idle, so a client naming a new run per request would grow
// memory without bound. A request naming a new run past max open runs
// first forgets the runs idle for idle (and has the pipeline drop their
// state: expire), at most once a second; if none is, it is refused
// (errTooManyRuns). A run ended by POST /v1/runs/{id}/end frees its place
// at once.
type runTracker struct {
	mu        sync.Mutex
	open      map[string]*openRun
	max       int
	idle      time.Duration // 0: a run stays open until it is ended
	now       func() time.Time
	expire    func() int
	lastSweep time.Time
}

// openRun is a named run's requests in flight and the end of its last one.
type openRun struct {
	active int
	last   time.Time
}

// tooManyRunsError refuses a request that names a new run past the bound.
type tooManyRunsError struct {
	max        int
	retryAfter time.Duration
}

func (e *tooManyRunsError) Error() string {
	return fmt.Sprintf("the service keeps at most %d open runs: end a run (POST /v1/runs/{id}/end), or try again once one has been idle for run_idle", e.max)
}

func newRunTracker(max int, idle time.Duration, expire func() int) *runTracker {
	return &runTracker{open: map[string]*openRun{}, max: max, idle: idle, now: time.Now, expire: expire}
}

// begin notes a request of run id and returns the func that notes its end,
// or a *tooManyRunsError for a new run past the bound.
func (t *runTracker) begin(id string) (func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.open[id]
	if r == nil {
		if len(t.open) >= t.max {
			if wait := t.sweep(); len(t.open) >= t.max {
				return nil, &tooManyRunsError{max: t.max, retryAfter: wait}
			}
		}
		r = &openRun{}
		t.open[id] = r
	}
	r.active++
	return func() {
		t.mu.Lock()
		r.active--
		r.last = t.now()
		t.mu.Unlock()
	}, nil
}

// sweep forgets the runs without a request in flight idle for t.idle, at
// most once a second, and has the pipeline end them; it returns how long
// until the next may be forgotten (at least a second). t.mu is held.
func (t *runTracker) sweep() time.Duration {
	now := t.now()
	wait := time.Second
	if t.idle <= 0 {
		return wait
	}
	if now.Sub(t.lastSweep) < time.Second {
		return wait
	}
	t.lastSweep = now
	soonest := time.Duration(-1)
	ended := 0
	for id, r := range t.open {
		if r.active > 0 {
			continue
		}
		left := r.last.Add(t.idle).Sub(now)
		if left <= 0 {
			delete(t.open, id)
			ended++
			continue
		}
		if soonest < 0 || left < soonest {
			soonest = left
		}
	}
	if ended > 0 {
		t.expire()
	}
	return max(wait, soonest)
}

// end forgets run id: it was ended.
func (t *runTracker) end(id string) {
	t.mu.Lock()
	delete(t.open, id)
	t.mu.Unlock()
}

// count returns how many named runs are open.
func (t *runTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}
