package pii_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestWrappedOrSpacedNumbers: a phone number whose line ends after a dash ("415-555-" then
// "2671"), a social security number whose groups are joined by dashes with spaces around
// them, and an address whose local part holds a dot leader (read as a dot) are masked whole.
func TestWrappedOrSpacedNumbers(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, tc := range []struct{ text, want string }{
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
		// not one
		{"rows 415-555-\n26711 no", "rows 415-555-\n26711 no"},
		{"123 - 45-6789", "123 - 45-6789"},
	} {
		got, _ := s.Redact(tc.text)
		assert.Equal(t, tc.want, got, "%q", tc.text)
	}
}
