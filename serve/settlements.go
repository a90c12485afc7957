package serve

import (
	"slices"
	"sync"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// settlements sums the settlement counts (meter.Meter.LostSettlements,
// UnconfirmedSettlements) of the meters of every pipeline the server
// built: a meter goes on counting after a reload closed its pipeline,
// while the next one sends its settlements again, so each is read until
// it is done and then kept as a sum.
type settlements struct {
	mu                sync.Mutex
	lost, unconfirmed int64 // of the meters done
	live              []*meter.Meter
}

// add notes the meters of pl.
func (s *settlements) add(pl *runtime.Pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	for _, stage := range plan.Stages {
		for _, l := range pl.Layers(stage) {
			if m, ok := l.Middleware.(*meter.Meter); ok {
				s.live = append(s.live, m)
			}
		}
	}
}

// counts returns the settlements the server's meters gave up on and
// those whose outcome a close did not wait for.
func (s *settlements) counts() (lost, unconfirmed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.foldLocked()
	lost, unconfirmed = s.lost, s.unconfirmed
	for _, m := range s.live {
		lost += m.LostSettlements()
		unconfirmed += m.UnconfirmedSettlements()
	}
	return lost, unconfirmed
}

// foldLocked adds the counts of the meters done to the sums and stops
// reading them, so that reloads do not pile meters up. s.mu is held.
func (s *settlements) foldLocked() {
	s.live = slices.DeleteFunc(s.live, func(m *meter.Meter) bool {
		if !m.Done() {
			return false
		}
		s.lost += m.LostSettlements()
		s.unconfirmed += m.UnconfirmedSettlements()
		return true
	})
}
