package pii

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMayNameReadsTheWordsWhole: mayName reads the last contextWindow+maxWordLen bytes of
// the output released, which hold every word that names an item and ends in its last
// contextWindow bytes.
func TestMayNameReadsTheWordsWhole(t *testing.T) {
	for _, w := range append(append(slicesOf(phoneWords), ssnWords...), cardWords...) {
		assert.LessOrEqual(t, len(w), maxWordLen, w)
		before := "x" + strings.Repeat(" ", 300) + w + strings.Repeat(" ", contextWindow-1)
		assert.True(t, mayName(before), "%q", w)
	}
	assert.False(t, mayName("lines "+strings.Repeat("of prose ", 30)))
	assert.False(t, mayName("call "+strings.Repeat("of prose ", 30)), "a word further back than the window")
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

// TestMayNumberReadsTheWindow: a number is read with the words before it when it starts
// within contextWindow bytes of the part, as in the whole text.
func TestMayNumberReadsTheWindow(t *testing.T) {
	s, err := New(Config{})
	assert.NoError(t, err)
	for pad := 0; pad < 2*contextWindow; pad++ {
		before, text := "call me on\n", strings.Repeat(" ", pad)+"9472 7916\n"
		whole, _ := s.Redact(before + text)
		alone, _ := s.Redact(text)
		if before+alone != whole {
			assert.True(t, mayNumber(text), "%d spaces", pad)
		}
	}
	assert.False(t, mayNumber("The quick brown fox jumps over the lazy dog, line 41 of the tale.\n"))
	assert.True(t, mayNumber("ｘ 9472 7916\n"))
}
