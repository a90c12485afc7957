package pii_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestPhoneGroupsOverALineBreak: a phone number whose groups a line break or several
// spaces join is masked whole, area code and all ("call (415)\n555-2671" lost only its
// last seven digits, "(415)" going out in clear); groups joined by nothing else are a
// column or a table of numbers, not a phone number.
func TestPhoneGroupsOverALineBreak(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	assertRedacted(t, s, []redactCase{
		{"call (415)\n555-2671 now", "call [REDACTED:phone] now"},
		{"call (415)\r\n555-2671 now", "call [REDACTED:phone] now"},
		{"call 415\n555 2671 now", "call [REDACTED:phone] now"},
		{"call 415-555\n2671 now", "call [REDACTED:phone] now"},
		{"call +1 415\n555 2671", "call [REDACTED:phone]"},
		{"call (415)  555-2671 now", "call [REDACTED:phone] now"},
		{"office +44 20\n7946 0958", "office [REDACTED:phone]"},
		{"office +44 20  7946 0958", "office [REDACTED:phone]"},
		{"office +44\n20 7946 0958", "office [REDACTED:phone]"},
		// columns and tables of numbers
		{"Lines:\n415\n555\n2671\n", "Lines:\n415\n555\n2671\n"},
		{"415  555  2671", "415  555  2671"},
		{"rows\n2024\n555-26\n", "rows\n2024\n555-26\n"},
	})
}
