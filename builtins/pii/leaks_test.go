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
	assertRedacted(t, s, []redactCase{
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
	})
}

// TestWrappedOrSpacedNumbers: a phone number whose line ends after a dash ("415-555-" then
// "2671"), a social security number whose groups are joined by dashes with spaces around
// them, and an address whose local part holds a dot leader (read as a dot) are masked whole.
func TestWrappedOrSpacedNumbers(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	assertRedacted(t, s, []redactCase{
		{"call 415-555-\n2671 now", "call [REDACTED:phone] now"},
		{"call 415.555.\r\n2671 now", "call [REDACTED:phone] now"},
		{"call (415) 555-\n  2671 now", "call [REDACTED:phone] now"},
		{"office +44 20 7946-\n0958 ok", "office [REDACTED:phone] ok"},
		{"tel 020 7946-\n0958", "tel [REDACTED:phone]"},
		{"call +1 415-555-\n2671 now", "call [REDACTED:phone] now"},
		{"ssn 123 - 45 - 6789 ok", "ssn [REDACTED:ssn] ok"},
		{"123 - 45 - 6789", "[REDACTED:ssn]"},
		{"mail jane\u2024doe@example.com ok", "mail [REDACTED:email] ok"},
		{"mail jane\ufe52doe@example.com ok", "mail [REDACTED:email] ok"},
		{"mail jane@example\u2024com ok", "mail [REDACTED:email] ok"},
		{"mail jane@mail\ufe52example.com ok", "mail [REDACTED:email] ok"},
		{"Contact\u2024\u2024\u2024jane@example.com", "Contact\u2024\u2024\u2024[REDACTED:email]"},
		// the next line does not go on with the number, which ends at the line's end
		{"call 020 7946-\n0958x", "call [REDACTED:phone]-\n0958x"},
		{"0100 000.\n0A0", "[REDACTED:phone].\n0A0"},
		// not one
		{"rows 415-555-\n26711 no", "rows 415-555-\n26711 no"},
		{"123 - 45-6789", "123 - 45-6789"},
	})
}

// redactCase is a text and what Redact makes of it.
type redactCase struct{ text, want string }

// assertRedacted asserts that s redacts each text as its case wants.
func assertRedacted(t *testing.T, s *pii.Scanner, cases []redactCase) {
	t.Helper()
	for _, tc := range cases {
		got, _ := s.Redact(tc.text)
		assert.Equal(t, tc.want, got, "%q", tc.text)
	}
}
