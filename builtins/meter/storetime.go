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
}

// storeTimeEvery is how often the store's time is read again: the clocks
// of a replica and of a server drift apart by far less than a second in
// that time.
const storeTimeEvery = time.Minute

// now returns the store's time, reading it when the offset is older than
// storeTimeEvery (or the pipeline's clock went back). A store that cannot
// be read leaves the last offset in use; before any was measured it is an
// error, and the call does not run.
func (s *storeTime) now(ctx context.Context) (time.Time, error) {
	if s.store == nil {
		return s.clock.Now(), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := s.clock.Now()
	if age := t0.Sub(s.read); !s.read.IsZero() && age >= 0 && age < storeTimeEvery {
		return t0.Add(s.offset), nil
	}
	_, at, err := s.store.StoreIDAt(ctx)
	t1 := s.clock.Now()
	if err == nil && at.IsZero() {
		err = errors.New("the store did not tell its time")
	}
	if err != nil {
		if s.read.IsZero() {
			return time.Time{}, err
		}
		return t1.Add(s.offset), nil
	}
	s.offset, s.read = at.Sub(t0.Add(t1.Sub(t0)/2)), t1
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
