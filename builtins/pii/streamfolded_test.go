package pii_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		want, n := c.s.Redact(text)
		require.NotZero(t, n, "%q", text)
		got, err := c.run(c.redact, strings.SplitAfter(text, "\n"))
		require.NoError(t, err)
		assert.Equal(t, want, got, "redact %q", text)
		_, err = c.run(c.block, strings.SplitAfter(text, "\n"))
		assert.Error(t, err, "block let the number of %q through", text)
	}
}
