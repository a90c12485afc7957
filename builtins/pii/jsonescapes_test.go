package pii_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestItemsBehindJSONTwoCharacterEscapes: a JSON document's text (a tool's result, a log
// line) writes a line break, a tab or a slash inside a string as "\n", "\t" and "\/" (an
// encoder escaping slashes does so for every one): an IBAN wrapped over lines, a card's groups
// set out by tabs after a word naming it or joined by slashes, an SSN's, a phone number
// wrapped after its area code are read as the model reads them, decoded, and masked whole.
// They went out in clear, read with a backslash and a letter between their groups.
func TestItemsBehindJSONTwoCharacterEscapes(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for text, want := range map[string]string{
		`{"iban":"DE89 3704 0044\n0532 0130 00"}`:       `{"iban":"[REDACTED:iban]"}`,
		`{"card":"4111\t1111\t1111\t1111"}`:             `{"card":"[REDACTED:card]"}`,
		`{"card":"4111\/1111\/1111\/1111"}`:             `{"card":"[REDACTED:card]"}`,
		`{"note":"card 4111 1111\n1111 1111"}`:          `{"note":"card [REDACTED:card]"}`,
		`{"ssn":"123\/45\/6789"}`:                       `{"ssn":"[REDACTED:ssn]"}`,
		`{"note":"call (415)\n555-2671 after 5"}`:       `{"note":"call [REDACTED:phone] after 5"}`,
		`log: paid with 4111\/1111\/1111\/1111, ok`:     `log: paid with [REDACTED:card], ok`,
		`{"to":"GB82 WEST 1234\r\n5698 7654 32","n":1}`: `{"to":"[REDACTED:iban]","n":1}`,
	} {
		got, _ := s.Redact(text)
		assert.Equal(t, want, got, "%s", text)
		v, _ := s.RedactValue(map[string]any{"content": text})
		assert.Equal(t, map[string]any{"content": want}, v, "%s", text)
	}
	// read decoded, a path, a pattern and a table of figures are what they were
	for _, text := range []string{
		`C:\temp\new\4111\1111`, `\d{3}-\d{2}-\d{4}`, `{"q":"1\t2\t3\t4","r":"2024\/01\/15"}`,
		`{"rows":"4520\t4810\t5230\t5120"}`, `{"v":"1.2.3\n4.5.6"}`,
	} {
		assert.Empty(t, s.Find(text), "%s", text)
	}
}

// TestStreamedJSONEscapesReadWhereTheyStand: a two-character escape is decoded where it stands
// between a number's groups, not everywhere in a text holding one such: an item on another
// line was read decoded in the whole text (its escapes elsewhere decoded) but not in the line
// released before the escape arrived, and went out in clear ("card\t4111 1111 1111 1111",
// then "row 1\n2").
func TestStreamedJSONEscapesReadWhereTheyStand(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"phone:\\t415 555 2671 ok\nrow 1\\n2 ok\n", "card\\t4111 1111 1111 1111 ok\nrow 1\\n2 ok\n",
		"SSN:\\t123 45 6789 ok\nrow 1\\n2 ok\n", "ip\\t10.0.0.1 ok\nrow 1\\n2 ok\n",
		"row 1\\n2 ok\ncard\\t4111 1111 1111 1111 ok\n",
	} {
		c.check(t, text, byLines(text))
		c.check(t, text, []string{text})
	}
}
