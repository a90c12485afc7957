package pii_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestCardsWithMixedSeparators: a card whose groups, as a card is printed (four digits each,
// the last of three to five; or 4-6-5 and 4-6-4), are joined by single spaces, dashes and dots
// mixed, as a number copied out of a form's fields is, is found whole; groups that mix them
// in another layout are not.
func TestCardsWithMixedSeparators(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for _, text := range []string{
		"4111 1111-1111 1111",
		"4111-1111 1111.1111",
		"4111-1111 1111-1111",
		"pay with 5555 5555-5555 4444 today",
		"3782-822463 10005",
		"4111 1111-1111\n1111",
	} {
		ms := s.Find(text)
		if assert.Len(t, ms, 1, "%q", text) {
			assert.Equal(t, strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(text, "pay with "), " today")), text[ms[0].Start:ms[0].End])
		}
	}
	for _, text := range []string{
		"4111-1111 11111111",
		"41111-111 1111-1111",
		"4111 11-11 1111 1111",
		"4111-1111  1111-1111",
		"4111-1111\t1111 1111",
		"4111/1111 1111-1111",
		"4111:1111 1111-1111",
	} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}
