package serve

import (
	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// settlements sums the settlement counts (meter.Meter.LostSettlements,
// UnconfirmedSettlements) of the meters of every pipeline the server
// built. A meter goes on counting after a reload closed its pipeline
// (while the next one sends its settlements again, or as a call still
// running at the close settles): each adds its counts as it makes them
// (meter.Meter.CountInto), so the server keeps no meter.
type settlements struct{ tally meter.Tally }

// add counts the meters of pl into s.
func (s *settlements) add(pl *runtime.Pipeline) {
	for _, stage := range plan.Stages {
		for _, l := range pl.Layers(stage) {
			if m, ok := l.Middleware.(*meter.Meter); ok {
				m.CountInto(&s.tally)
			}
		}
	}
}

// counts returns the settlements the server's meters gave up on and
// those whose outcome a close did not wait for.
func (s *settlements) counts() (lost, unconfirmed int64) {
	return s.tally.Lost(), s.tally.Unconfirmed()
}
