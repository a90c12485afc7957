package pii_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestLinesEndingInANumberAndAColonGoOut: a line ending in a number and a colon (a heading,
// "Step 3:", "Q3 2024:") goes out as it comes: no item runs on from a colon over
// a line break (a card's groups joined by colons are read on one line), so there is nothing
// for it to wait for. What goes out is what Redact makes of the whole text.
func TestLinesEndingInANumberAndAColonGoOut(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, line := range []string{"Step %d:\n", "Option %d: \n", "Q3 20%02d:\n", "card %d:\n", "SSN %d:\n"} {
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, line, i%60+1)
			b.WriteString("Do the next thing.\n")
		}
		text := b.String()
		want, _ := s.Redact(text)
		got, model, err := streamHeld(t, `{"action":"redact"}`, byLines(text))
		require.NoError(t, err, "%q", line)
		assert.True(t, want == got, "%q: the output is not what Redact makes of the whole text", line)
		assert.Zero(t, model.maxHeld, "%q: held %d bytes", line, model.maxHeld)
	}
}

// colonPieces are the parts of colonText: numbers ending a line with a colon, and the
// numbers, cards, phone numbers and SSNs that may follow them on the next line.
var colonPieces = []string{
	"1:", "12:", "Step 3:", "4111:", "4111 1111:", "card ", "ssn ", "call ", ":", ": ", "\n", "\n", "\n",
	"4111", "1111", "4111111111111111", "4111 1111 1111 1111", "1111:1111", "123-45-6789", "415",
	"555-2671", "(415)", "+44 20", "7946 0958", " ", "-", ".", "12:30:", "2001:db8:",
}

// TestStreamedColonLinesMaskedAsWhole: random texts of colonPieces go out of the layer as
// Redact masks the whole text, in one delta, cut in two at every byte or a few bytes a delta.
func TestStreamedColonLinesMaskedAsWhole(t *testing.T) {
	newStreamedAsWhole(t).checkTexts(t, rand.New(rand.NewPCG(11, 3)), 150, func(rng *rand.Rand) string {
		var b strings.Builder
		for range 3 + rng.IntN(9) {
			b.WriteString(colonPieces[rng.IntN(len(colonPieces))])
		}
		return b.String()
	})
}

// TestCardBeforeAColonEndingALine: a card whose line ends in a colon is found whatever the
// next line holds: a colon and a line break end a token of colons, and "555-2671" on the next
// line made one of the card's and its own groups ("x 4111111111111111:" went out in clear).
func TestCardBeforeAColonEndingALine(t *testing.T) {
	found := map[string]string{}
	for _, next := range []string{"555-2671", "12.5", "1111:1111", "ok", "12"} {
		found["x 4111111111111111:\n"+next] = "4111111111111111"
	}
	assertCardsFound(t, found, nil)
}
