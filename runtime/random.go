package runtime

import (
	"math/rand/v2"
	"sync"
)

// Random is the randomness port of the runtime: backoff jitter draws from
// the pipeline's source, so that a scenario (and agentc prove) seeds one
// and its runs replay exactly. Implementations must be safe for concurrent
// use.
type Random interface {
	// Int64N returns a number in [0, n); n must be positive.
	Int64N(n int64) int64
}

// processRandom is the default source: the process's.
type processRandom struct{}

func (processRandom) Int64N(n int64) int64 { return rand.Int64N(n) }

// seededRandom is a deterministic source, locked for concurrent use.
type seededRandom struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewSeededRandom returns a deterministic source: two sources of one seed
// draw the same numbers in the same order.
func NewSeededRandom(seed uint64) Random {
	return &seededRandom{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *seededRandom) Int64N(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int64N(n)
}

// random returns the deps' source (the process's when unset).
func (d *Deps) random() Random {
	if d.Random != nil {
		return d.Random
	}
	return processRandom{}
}

// Random returns the pipeline's source of randomness (Deps.Random, else the
// process's).
func (b *BuildContext) Random() Random { return b.p.deps.random() }
