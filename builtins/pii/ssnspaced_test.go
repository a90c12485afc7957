package pii

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSSNWithSpacedSeparatorsAfterAContextWord: the groups of an SSN joined by a slash with a
// space either side, or by a dash or a slash with a space on one side only ("123 -45 -6789",
// a dash glued to the next group), are found after a word naming one; without it they are a
// sum, a ratio or a range, and are left alone. The separator is the same throughout.
func TestSSNWithSpacedSeparatorsAfterAContextWord(t *testing.T) {
	s := newScanner(t, KindSSN)
	for _, ssn := range []string{
		"123 / 45 / 6789", "123 -45 -6789", "123- 45- 6789", "123 /45 /6789", "123/ 45/ 6789",
		"123 / 45 / \n6789", "123 -45 -\n6789",
	} {
		for _, before := range []string{"SSN: ", "ssn ", "my social security number is ", "SS# "} {
			text := before + ssn + " ok"
			assert.Equal(t, []string{"ssn:" + ssn}, found(text, s.Find(text)), "%q", text)
		}
	}
	for _, text := range []string{
		"123 / 45 / 6789", "total 123 -45 -6789", "123- 45- 6789", "SSN: 123 -45 / 6789",
		"SSN: 123 -45- 6789", "SSN: 123 / 45/6789", "SSN: 123  /  45  /  6789",
	} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}
