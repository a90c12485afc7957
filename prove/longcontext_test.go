package prove_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A model with a steep long-context tier (three times its prices): the
// calls prove scripts to reach a usd ceiling are long enough to cross the
// tier's threshold, where the meter charges them at the tier's prices. The
// budget's bound (the ledger ends at most one call over the ceiling)
// counts that call at the same prices, so the meter proves clean; counted
// at the model's own prices, its third call would be a false overshoot.
func TestLongContextTierProvesClean(t *testing.T) {
	r := explorePolicy(t, `models: primary: {usd_per_mtok_in: 3, usd_per_mtok_out: 15,
	long_context: {above_input_tokens: 200000, usd_per_mtok_in: 9, usd_per_mtok_out: 45}}
chains: chat: [{use: "meter", budget: usd: 100}]
`, 3)
	assert.Empty(t, violated(r))
}
