package pii

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRedactOtherSpellings: a value written with other characters than the plain ASCII ones
// is masked whole, and the text around it is kept as it was.
func TestRedactOtherSpellings(t *testing.T) {
	s := newScanner(t)
	for _, tt := range []struct{ name, in, want string }{
		// digits of other scripts
		{"arabic-indic card", "card ٤١١١ ١١١١ ١١١١ ١١١١ ok", "card [REDACTED:card] ok"},
		{"extended arabic-indic ssn", "ssn ۱۲۳-۴۵-۶۷۸۹.", "ssn [REDACTED:ssn]."},
		{"devanagari card", "कार्ड ४१११११११११११११११", "कार्ड [REDACTED:card]"},
		{"devanagari phone", "फोन +१ ४१५ ५५५ २६७१", "फोन [REDACTED:phone]"},
		{"bengali digits", "৪১১১ ১১১১ ১১১১ ১১১১", "[REDACTED:card]"},
		// invisible characters that are not format characters
		{"combining grapheme joiner", "pan 41\u034f11111111111111!", "pan [REDACTED:card]!"},
		{"variation selector", "4111\ufe0f111111111111", "[REDACTED:card]"},
		{"small commercial at", "to jane\ufe6bexample.com now", "to [REDACTED:email] now"},
		// other separators
		{"card with dots", "card 4111.1111.1111.1111.", "card [REDACTED:card]."},
		{"card with slashes", "4111/1111/1111/1111", "[REDACTED:card]"},
		{"card with underscores", "pan=4111_1111_1111_1111", "pan=[REDACTED:card]"},
		{"ssn with slashes", "SSN 123/45/6789", "SSN [REDACTED:ssn]"},
		{"ssn with underscores", "ssn: 123_45_6789", "ssn: [REDACTED:ssn]"},
		{"phone with underscores", "+1_415_555_2671", "[REDACTED:phone]"},
		// escapes a tool result may carry
		{"percent-encoded at", "GET /users?email=jane.doe%40example.com&x=1", "GET /users?email=[REDACTED:email]&x=1"},
		{"percent-encoded spaces", "q=4111%201111%201111%201111", "q=[REDACTED:card]"},
		{"percent-encoded utf-8", "jane%EF%BC%A0example.com", "[REDACTED:email]"},
		{"html decimal reference", "<td>jane&#64;example.com</td>", "<td>[REDACTED:email]</td>"},
		{"html hex reference", "jane&#x40;example.com", "[REDACTED:email]"},
		{"html named reference", "jane&commat;example&period;com", "[REDACTED:email]"},
		{"html no-break spaces", "4111&nbsp;1111&nbsp;1111&nbsp;1111 &amp; more", "[REDACTED:card] &amp; more"},
		{"json unicode escape", `{"to":"jane\u0040example.com"}`, `{"to":"[REDACTED:email]"}`},
		{"json surrogate pair digits", `\ud835\udfd2111111111111111`, "[REDACTED:card]"},
		// escapes escaped again
		{"json quoted in a json string", `{"log":"{\\\"to\\\":\\\"jane\\u0040example.com\\\"}"}`, `{"log":"{\\\"to\\\":\\\"[REDACTED:email]\\\"}"}`},
		{"percent-encoded twice", "q=4111%25201111%25201111%25201111&x", "q=[REDACTED:card]&x"},
		{"html reference escaped", "jane&amp;#64;example.com", "[REDACTED:email]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, n := s.Redact(tt.in)
			assert.Equal(t, tt.want, out)
			assert.Positive(t, n)
		})
	}
}

// TestOtherSpellingsNotOverread: the readings that find other spellings find nothing where
// there is nothing to find.
func TestOtherSpellingsNotOverread(t *testing.T) {
	s := newScanner(t)
	for _, in := range []string{
		"price 4111111111111111.25",
		"100%25 done, 50% off, AT&T; &unknown; \\u12",
		"file_2024_01_15_1234.log",
		"version 1.2.3.4567",
		"snake_case_41_11",
		"path /4111/1111/1111/1112",
		"%ZZ%4",
		`C:\\new\\table\\4111`, "100%2525 done",
	} {
		assert.Empty(t, found(in, s.Find(in)), in)
	}
}
