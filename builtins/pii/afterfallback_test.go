package pii

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanOutputAfterMasksAnItemRunningBack: a part of the output released after text that
// an item it ends runs back into (which the hold keeps from happening) has that item's part
// in it masked, not the part read alone, which does not find it.
func TestCleanOutputAfterMasksAnItemRunningBack(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	m := &Middleware{Action: ActionRedact, scanner: s}
	before, text := "call &#52;&#49;&#53;\n", "555-2671 now\n"
	require.NotEmpty(t, s.Find(before+text))
	got, err := m.cleanOutputAfter(before, text)
	require.NoError(t, err)
	assert.NotContains(t, got, "2671")
	assert.Contains(t, got, " now\n")
}
