package runtime

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runActivity ends named runs that have had no call, state operation or
// save for idle (settings.run_idle): a host that never calls EndRun for its
// runs would otherwise keep their per-run state for the pipeline's
// lifetime. A run
// with a call in flight is never idle. Runs made fresh for a call without
// a run id are ended by the call itself and are not tracked.
type runActivity struct {
	pl   *Pipeline
	idle time.Duration
	runs sync.Map // run id -> *runSeen
	stop chan struct{}
	once sync.Once
}

type runSeen struct {
	last   atomic.Int64 // the clock's UnixNano at the last call's start or end
	active atomic.Int32 // calls in flight
}

// newRunActivity returns the tracker of pl's runs and starts its sweeper,
// or returns nil when nothing is to be tracked: no idle period, or nothing
// that keeps per-run state: no layer that is a RunEnder, no state section,
// no checkpointing at build time and no secret_result tool (whose results
// taint the run's state).
func newRunActivity(pl *Pipeline, idle time.Duration) *runActivity {
	if idle <= 0 || !pl.keepsRunState() {
		return nil
	}
	a := &runActivity{pl: pl, idle: idle, stop: make(chan struct{})}
	every := min(max(idle/4, time.Millisecond), time.Minute)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-t.C:
				a.sweep()
			}
		}
	}()
	return a
}

// keepsRunState reports whether pl may keep state per run.
func (pl *Pipeline) keepsRunState() bool {
	if pl.state != nil || pl.recordRuns.Load() {
		return true
	}
	for _, e := range pl.tools {
		if e.taint != nil {
			return true
		}
	}
	return slices.ContainsFunc(pl.insts, func(inst Middleware) bool {
		_, ok := inst.(RunEnder)
		return ok
	})
}

// begin records the start of a call of run id; the returned func records
// its end.
func (a *runActivity) begin(id string) *runSeen {
	v, ok := a.runs.Load(id)
	if !ok {
		v, _ = a.runs.LoadOrStore(id, &runSeen{})
	}
	s := v.(*runSeen)
	s.active.Add(1)
	s.last.Store(a.pl.clock().Now().UnixNano())
	return s
}

func (a *runActivity) end(s *runSeen) {
	s.last.Store(a.pl.clock().Now().UnixNano())
	s.active.Add(-1)
}

// touch records activity of run id outside a call (a state operation, a
// recorded transcript, a save).
func (a *runActivity) touch(id string) { a.end(a.begin(id)) }

// forget stops tracking a run the host ended.
func (a *runActivity) forget(id string) { a.runs.Delete(id) }

// sweep ends every run idle for a.idle and returns how many it ended.
func (a *runActivity) sweep() int {
	cutoff := a.pl.clock().Now().Add(-a.idle).UnixNano()
	n := 0
	a.runs.Range(func(k, v any) bool {
		s := v.(*runSeen)
		if s.active.Load() != 0 || s.last.Load() > cutoff {
			return true
		}
		if !a.runs.CompareAndDelete(k, v) {
			return true
		}
		if s.active.Load() != 0 { // a call began meanwhile: keep the run
			a.runs.Store(k, v)
			return true
		}
		a.pl.endRun(k.(string))
		n++
		return true
	})
	return n
}

func (a *runActivity) close() { a.once.Do(func() { close(a.stop) }) }

// ExpireIdleRuns ends, now, every named run that has had no call for
// settings.run_idle (as the pipeline's own sweeper does every quarter of
// that period, at most every minute) and returns how many it ended. A
// host on a virtual clock calls it after advancing the clock.
func (pl *Pipeline) ExpireIdleRuns() int {
	if pl.runs == nil {
		return 0
	}
	return pl.runs.sweep()
}

func (pl *Pipeline) clock() Clock { return pl.deps.clock() }
