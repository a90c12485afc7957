package explain_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A meter with on_cross "refuse" reserves a call's estimate once for each
// model call the layers inside it can make: explain says how many times,
// with the same product it gives for the failing call.
func TestMeterReservationCountsTheModelCallsInside(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p
models: {
	primary: {}
	backup: {}
}
chains: chat: [
	{use: "meter", name: "spend", budget: usd: 5, on_cross: "refuse"},
	{use: "meter", name: "count", budget: calls: 100, on_cross: "refuse"},
	{use: "retry", max_attempts: 3},
	{use: "hedge", models: ["primary", "backup"]},
]
`), 0o644))
	x := build(t, dir)
	require.Len(t, x.Stages, 1)
	assert.Contains(t, x.Stages[0].Consequences,
		"spend (meter) reserves each call's estimate 6 times, the most model calls it can charge for one call (retry 3 attempts × hedge 2 models)")
	for _, c := range x.Stages[0].Consequences {
		assert.NotContains(t, c, "count (meter) reserves", "a calls ceiling reserves one call, whatever the model calls")
	}
}
