package pii_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestCardWithUnevenGaps: a card whose groups are joined by single spaces and by a few
// spaces (a typing slip, a zero-width character between two spaces) is found whole, as one
// copied out of a form's fields is ("4111 1111-1111 1111"); "4111  1111 1111 1111" went out
// in clear. Groups joined by wide gaps alone stay a table's row.
func TestCardWithUnevenGaps(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for _, tc := range []struct{ text, want string }{
		{"card 4111  1111 1111 1111 ok", "card [REDACTED:card] ok"},
		{"card 4111 1111  1111 1111 ok", "card [REDACTED:card] ok"},
		{"card 4111 1111 1111   1111 ok", "card [REDACTED:card] ok"},
		{"card 4111  1111  1111 1111 ok", "card [REDACTED:card] ok"},
		{"4111  1111 1111 1111", "[REDACTED:card]"},
		{"card 4111 \u200b 1111 1111 1111 ok", "card [REDACTED:card] ok"},
		{"card 4111  1111-1111 1111 ok", "card [REDACTED:card] ok"},
		{"amex 3782  822463 10005", "amex [REDACTED:card]"},
		{"room 1 4111  1111 1111 1111", "room 1 [REDACTED:card]"},
		// not a card's printed layout, or no card
		{"Region  4520  4810  5230  5121", "Region  4520  4810  5230  5121"},
		{"4111  1111 1111 1112", "4111  1111 1111 1112"},
		{"4111  111 1111 1111 1111", "4111  111 1111 1111 1111"},
	} {
		got, _ := s.Redact(tc.text)
		assert.Equal(t, tc.want, got, "%q", tc.text)
	}
}
