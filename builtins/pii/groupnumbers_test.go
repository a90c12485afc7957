package pii_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestGroupsAsNumbersAreReadApart pins the limit docs/detection.md
// (Splits) states: the numbers of an object's values are read each on its
// own, whatever their keys, so a card's groups posted as JSON numbers are
// four numbers and pass, while a whole card in one number is found and the
// same groups posted as strings are read together.
func TestGroupsAsNumbersAreReadApart(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	numbers := map[string]any{"cc1": float64(4111), "cc2": float64(1111), "cc3": float64(1111), "cc4": float64(1111)}
	assert.Empty(t, s.ScanValue(map[string]any{"card": numbers}))
	got, n := s.RedactValue(map[string]any{"card": numbers})
	assert.Zero(t, n)
	assert.Equal(t, map[string]any{"card": numbers}, got)

	ms := s.ScanValue(map[string]any{"cc": float64(4111111111111111)})
	require.Len(t, ms, 1)
	assert.Equal(t, pii.KindCard, ms[0].Kind)

	strs := map[string]any{"cc1": "4111", "cc2": "1111", "cc3": "1111", "cc4": "1111"}
	ms = s.ScanValue(map[string]any{"card": strs})
	require.Len(t, ms, 1)
	assert.Equal(t, pii.KindCard, ms[0].Kind)
}
