package pii_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
		want, n := c.s.Redact(text)
		require.NotZero(t, n, "%q", text)
		got, err := c.run(c.redact, strings.SplitAfter(text, "\n"))
		require.NoError(t, err)
		assert.Equal(t, want, got, "redact streamed %q", text)
		got, err = c.run(c.block, strings.SplitAfter(text, "\n"))
		assert.Error(t, err, "%q", text)
		ms := c.s.Find(text)
		assert.True(t, strings.HasPrefix(text[:ms[0].Start], got), "block released %q, past the item's start %d", got, ms[0].Start)
	}
}
