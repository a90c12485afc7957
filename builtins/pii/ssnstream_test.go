package pii_test

import (
	"testing"
)

// TestStreamedSSNWithSpacedSeparatorsMaskedAsWhole: an SSN whose groups a slash or a dash
// with spaces joins (TestSSNWithSpacedSeparatorsAfterAContextWord), wrapped after one of its
// separators, goes out as the whole text is masked, cut at every byte: its line is held with
// the next.
func TestStreamedSSNWithSpacedSeparatorsMaskedAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"Hello.\nSSN: 123 / 45 / \n6789 ok\n", "Hello.\nSSN: 123 /\n45 /6789 ok\n", "Hello.\nSSN: 123 -45 -\n6789\n",
		"Hello.\nSSN: 123- 45- \n6789 ok\n", "Hello.\nSSN: 123 / \n45 / 6789\n",
	} {
		c.check(t, text, []string{text})
		for i := 0; i <= len(text); i++ {
			c.check(t, text, []string{text[:i], text[i:]})
		}
	}
}
