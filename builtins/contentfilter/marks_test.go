package contentfilter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeywordThroughInvisibles: a keyword with combining marks, the combining grapheme
// joiner, variation selectors or other characters a reader does not see between its letters,
// or written in tag characters, is found, and the match covers what was written between
// and on its letters.
func TestKeywordThroughInvisibles(t *testing.T) {
	f, err := New(Config{Keywords: []string{"bomb", "c++", "top secret"}})
	require.NoError(t, err)
	for _, tt := range []struct{ name, in, rule, text string }{
		{"combining acute", "a bo\u0301mb here", "bomb", "bo\u0301mb"},
		{"combining grapheme joiner", "a bo\u034fmb here", "bomb", "bo\u034fmb"},
		{"variation selector", "a b\ufe0fomb here", "bomb", "b\ufe0fomb"},
		{"mark on the last letter", "a bomb\u0301 here", "bomb", "bomb\u0301"},
		{"hangul filler between words", "top\u3164secret", "top secret", "top\u3164secret"},
		{"tag characters", "a \U000E0062\U000E006F\U000E006D\U000E0062 here", "bomb", "\U000E0062\U000E006F\U000E006D\U000E0062"},
		{"symbol keyword with a mark", "I write c\u0301++ daily", "c++", "c\u0301++"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Check(tt.in)
			require.True(t, ok, "%q", tt.in)
			assert.Equal(t, tt.rule, m.Rule)
			assert.Equal(t, tt.text, tt.in[m.Start:m.End])
		})
	}
	for _, clean := range []string{"bombé", "a b\u0301 omb", "résumé", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F flag"} {
		_, ok := f.Check(clean)
		assert.False(t, ok, "%q", clean)
	}
}
