package pii_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamedByLines streams text one line a delta through c: with "redact" it goes out as
// Redact masks the whole text, and "block" ends the call releasing only text before the
// first item.
func streamedByLines(t *testing.T, c *streamedAsWhole, text string) {
	t.Helper()
	want, n := c.s.Redact(text)
	require.NotZero(t, n, "%q", text)
	got, err := c.run(c.redact, strings.SplitAfter(text, "\n"))
	require.NoError(t, err)
	assert.Equal(t, want, got, "redact streamed %q", text)
	got, err = c.run(c.block, strings.SplitAfter(text, "\n"))
	assert.Error(t, err, "block let the item of %q through", text)
	ms := c.s.Find(text)
	assert.True(t, strings.HasPrefix(text[:ms[0].Start], got), "block released %q, past the item's start %d", got, ms[0].Start)
}

// TestStreamedWordBeforeInvisibleCharacters: a phone word or an SSN's label ending a line
// counts for the number on the next line however many characters the detectors skip follow
// it (zero-width spaces, combining marks on nothing, replacement characters, escapes of
// them): the text released before a line is handed on as far back as the detectors read it.
func TestStreamedWordBeforeInvisibleCharacters(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"call me on" + strings.Repeat("\u200b", 100) + "\n9472 7916\n",
		"call me on " + strings.Repeat("\u0301", 150) + "\n9472 7916\n",
		"call me on " + strings.Repeat("\ufffd", 100) + "\n9472 7916\n",
		"my SSN is" + strings.Repeat("\u200b", 100) + "\n123456789\n",
		"call me on\n" + strings.Repeat("\u200b", 60) + "\n" + strings.Repeat("\u200b", 60) + "\n9472 7916\n",
		"call me on" + strings.Repeat("&#8203;", 60) + "\n9472 7916\n",
	} {
		streamedByLines(t, c, text)
	}
}

// TestStreamedEscapedDigitAtLineEnd: a line that ends in a digit written as a character
// reference is held with the next line, as one ending in the digit is, so that a number
// wrapped after it is masked (or refused) whole.
func TestStreamedEscapedDigitAtLineEnd(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"call &#52;&#49;&#53;\n555-2671 now\n",
		"card 4111 1111 &#49;&#49;&#49;&#49;\n1111 1111 ok\n",
		"card 4111 1111 1111 &#x31;&#x31;&#x31;&#x31;\n ok\n",
		"call %34%31%35\n555-2671 now\n",
	} {
		streamedByLines(t, c, text)
	}
}
