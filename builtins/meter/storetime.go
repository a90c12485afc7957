package meter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// storeTime tells which window a call falls in on the clock of the store
// that keeps the ledgers, when the store tells its time
// (runtime.StoreClock: a redis or postgres store's server), so that
// replicas whose clocks disagree charge a call to the same window, as they
// agree on the store's expiries. It reads the server's time at most every
// storeTimeEvery, and in between adds to the time then read (at the middle
// of the round trip) the time elapsed since on the pipeline's clock: with
// the real clock, on its monotonic reading, so that a step of the host's
// wall clock (NTP) does not move it. A step beyond storeTimeStep makes the
// next call read the server's time again. Without such a store it reads the
// pipeline's clock.
type storeTime struct {
	clock runtime.Clock
	store runtime.StoreClock

	mu sync.Mutex
	// at is the store's time last read, and read the pipeline's clock at
	// the same moment (with its monotonic reading, from the real clock);
	// zero: never read.
	at, read time.Time
	// reading is closed when the read under way ends; nil: none is.
	reading chan struct{}
	// failed is when a read last failed, on clock, and err its error: a
	// store that cannot be read is asked again after storeTimeRetry.
	failed time.Time
	err    error
}

// storeTimeEvery is how often the store's time is read again: the clocks
// of a replica and of a server drift apart by far less than a second in
// that time.
const storeTimeEvery = time.Minute

// storeTimeStep is how far the pipeline's wall clock may move apart from
// its monotonic reading since the store's time was read before the store's
// time is read again: a step of the host's clock (NTP steps it when it is
// off by more than 128 ms) rather than the slew of its rate.
const storeTimeStep = time.Second

// storeTimeRetry is how long after a failed read the store's time is not
// asked again: in between, the last offset is used, or, before any was
// measured, the read's error is the call's.
const storeTimeRetry = time.Second

// now returns the store's time, reading it when the last read is older
// than storeTimeEvery, or the pipeline's clock went back, or its wall clock
// stepped (stale). One read is under way at a time, outside the lock:
// meanwhile, and when a read fails, calls go on from the last read; before
// any was made they wait for the read
// under way (as long as their context lets them) or fail with the last
// read's error, and the call does not run.
func (s *storeTime) now(ctx context.Context) (time.Time, error) {
	if s.store == nil {
		return s.clock.Now(), nil
	}
	for {
		s.mu.Lock()
		t0 := s.clock.Now()
		measured := !s.read.IsZero()
		if measured && !s.stale(t0) {
			s.mu.Unlock()
			return s.since(t0), nil
		}
		if wait := s.reading; wait != nil {
			if measured {
				s.mu.Unlock()
				return s.since(t0), nil
			}
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return time.Time{}, ctx.Err()
			}
		}
		if since := t0.Sub(s.failed); s.err != nil && since >= 0 && since < storeTimeRetry {
			defer s.mu.Unlock()
			if measured {
				return s.since(t0), nil
			}
			return time.Time{}, s.err
		}
		done := make(chan struct{})
		s.reading = done
		s.mu.Unlock()
		return s.measure(ctx, t0, done)
	}
}

// measure reads the store's time for now, which started its read at t0
// and ends it by closing done.
func (s *storeTime) measure(ctx context.Context, t0 time.Time, done chan struct{}) (time.Time, error) {
	_, at, err := s.store.StoreIDAt(ctx)
	t1 := s.clock.Now()
	if err == nil && at.IsZero() {
		err = errors.New("the store did not tell its time")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reading = nil
	close(done)
	if err != nil {
		// A read the caller gave up on says nothing of the store.
		if ctx.Err() == nil {
			s.failed, s.err = t1, err
		}
		if s.read.IsZero() {
			return time.Time{}, err
		}
		return s.since(t1), nil
	}
	s.at, s.read, s.err = at, t0.Add(t1.Sub(t0)/2), nil
	return s.since(t1), nil
}

// stale reports whether the store's time last read is too old to go on
// from at t, a reading of the pipeline's clock: storeTimeEvery old, or
// read after t (a virtual clock set back), or the wall clock stepped by
// more than storeTimeStep since. s.mu is held.
func (s *storeTime) stale(t time.Time) bool {
	age := t.Sub(s.read) // monotonic, with the real clock
	wall := t.Round(0).Sub(s.read.Round(0))
	return age < 0 || age >= storeTimeEvery || (wall-age).Abs() > storeTimeStep
}

// since returns the store's time at t, a reading of the pipeline's clock:
// the store's time last read plus the time elapsed since on the pipeline's
// clock (monotonic, with the real clock). s.mu is held and a read was made.
func (s *storeTime) since(t time.Time) time.Time {
	return s.at.Add(t.Sub(s.read))
}

// last returns the store's time from its last read, without a round trip
// (the pipeline's clock before any).
func (s *storeTime) last() time.Time {
	if s.store == nil {
		return s.clock.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read.IsZero() {
		return s.clock.Now()
	}
	return s.since(s.clock.Now())
}
