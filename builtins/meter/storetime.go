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
// storeTimeEvery, and in between adds the offset then measured (less half
// the round trip) to the pipeline's clock. Without such a store it reads
// the pipeline's clock.
type storeTime struct {
	clock runtime.Clock
	store runtime.StoreClock

	mu     sync.Mutex
	offset time.Duration
	// read is when the offset was measured, on clock; zero: never.
	read time.Time
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

// storeTimeRetry is how long after a failed read the store's time is not
// asked again: in between, the last offset is used, or, before any was
// measured, the read's error is the call's.
const storeTimeRetry = time.Second

// now returns the store's time, reading it when the offset is older than
// storeTimeEvery (or the pipeline's clock went back). One read is under
// way at a time, outside the lock: meanwhile, and when a read fails, calls
// use the last offset; before any was measured they wait for the read
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
		if age := t0.Sub(s.read); measured && age >= 0 && age < storeTimeEvery {
			s.mu.Unlock()
			return t0.Add(s.offset), nil
		}
		if wait := s.reading; wait != nil {
			if measured {
				s.mu.Unlock()
				return t0.Add(s.offset), nil
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
				return t0.Add(s.offset), nil
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
		return t1.Add(s.offset), nil
	}
	s.offset, s.read, s.err = at.Sub(t0.Add(t1.Sub(t0)/2)), t1, nil
	return t1.Add(s.offset), nil
}

// last returns the store's time by the offset last measured, without a
// round trip (the pipeline's clock before any).
func (s *storeTime) last() time.Time {
	if s.store == nil {
		return s.clock.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock.Now().Add(s.offset)
}
