package idempotent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestARecordWithTheDigestRefusesUnderAnEarlierBuild: a build before the
// arguments' digest reads records as this build's storedErr does (it is
// unchanged): it refuses a duplicate with the record as the error of a
// call that ran, never replays the outcome without checking the
// arguments.
func TestARecordWithTheDigestRefusesUnderAnEarlierBuild(t *testing.T) {
	m := &Idempotent{name: "idempotent", KeyArgs: []string{"order_id"}}
	c := &runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}}
	res := record(storedError{Message: argsNote, Args: m.argsDigest(c), Outcome: []byte(`"refunded m-1"`)})

	err, ok := m.storedErr(res)
	require.True(t, ok, "an earlier build reads it as a stored error")
	require.ErrorIs(t, err, runtime.ErrRan)
	assert.ErrorContains(t, err, "which this build cannot compare")

	out, err := m.matching(c, res)
	require.NoError(t, err)
	assert.Equal(t, `"refunded m-1"`, string(out), "this build reads the outcome")
}
