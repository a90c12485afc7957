package prove

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A word boundary (\b, \B) is empty-width: the string written for a
// pattern holding one is checked against it, and a pattern no string of
// the walk matches is given up as before.
func TestMatchingTakesWordBoundaries(t *testing.T) {
	for _, p := range []string{`^\bORD-[0-9]{4}\b$`, `\bref\B[a-z]+`, `^[A-Z]\w*\b`} {
		v, ok := matching(p, 0, 0)
		require.True(t, ok, p)
		assert.Regexp(t, regexp.MustCompile(p), v, p)
	}
	_, ok := matching(`^a\bb$`, 0, 0)
	assert.False(t, ok, "the walk's ab has no boundary between a and b")
}
