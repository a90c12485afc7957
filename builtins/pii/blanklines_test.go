package pii_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// blankGaps are runs of blank lines and spaces longer than the window the part before a cut
// is read alone in, and short ones.
var blankGaps = []string{strings.Repeat("\n", 300), strings.Repeat("\n", 257), strings.Repeat(" \n", 200),
	strings.Repeat("\r\n", 140), strings.Repeat(" ", 300) + "\n", "\n", "\n\n", " "}

// blankLinesText joins streamPieces and contextItems with runs of blank lines between them.
func blankLinesText(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("hello\n")
	for range 2 + rng.IntN(4) {
		b.WriteString(blankGaps[rng.IntN(len(blankGaps))])
		if rng.IntN(2) == 0 {
			b.WriteString(contextItems[rng.IntN(len(contextItems))])
		}
		for range 1 + rng.IntN(3) {
			b.WriteString(streamPieces[rng.IntN(len(streamPieces))])
		}
	}
	return b.String()
}

// TestStreamedAfterBlankLines: a line held back to the start of an item that follows more
// blank lines than the part before a cut is read alone in ("hello", 300 line breaks, then
// "+44 20 7946 0958" and a line of groups that unmakes it) went through a reading of the
// blanks alone, whose end came before its start, and the stream panicked; such texts, cut at
// random, now go out as Redact masks the whole text.
func TestStreamedAfterBlankLines(t *testing.T) {
	c := newStreamedAsWhole(t)
	text := "hello\n" + strings.Repeat("\n", 300) + "+44 20 7946 0958\n12345 67890 12345 678\nx"
	c.check(t, text, []string{text})
	c.check(t, text, byLines(text))
	rng := rand.New(rand.NewPCG(300, 1))
	n := 60
	if testing.Short() {
		n = 12
	}
	for range n {
		text := blankLinesText(rng)
		c.check(t, text, []string{text})
		c.check(t, text, byLines(text))
		c.check(t, text, chunks(text, rng))
		for range 8 {
			a := rng.IntN(len(text) + 1)
			b := a + rng.IntN(len(text)-a+1)
			c.check(t, text, []string{text[:a], text[a:b], text[b:]})
		}
	}
}

// FuzzStreamedAfterBlankLines: any text after 300 blank lines, cut anywhere into three
// deltas, goes out of the layer as the whole text is masked.
func FuzzStreamedAfterBlankLines(f *testing.F) {
	f.Add("+44 20 7946 0958\n12345 67890 12345 678\nx", 0, 17)
	f.Add("+44 20 7946 0958\n12 ok", 5, 18)
	f.Add("call (415)\n555-2671\n1234 5678 9012 3456 78\n", 11, 20)
	c := newStreamedAsWhole(f)
	blanks := "hello\n" + strings.Repeat("\n", 300)
	f.Fuzz(func(t *testing.T, text string, a, b int) {
		if len(text) > 256 || !utf8.ValidString(text) {
			return
		}
		text = blanks + text
		a, b = len(blanks)+min(max(a, 0), len(text)-len(blanks)), len(blanks)+min(max(b, 0), len(text)-len(blanks))
		a, b = min(a, b), max(a, b)
		c.check(t, text, []string{text[:a], text[a:b], text[b:]})
	})
}

// TestStreamedItemTheNextLinesMake: an item that the whole text finds before a cut, and that
// the part before the cut, read alone, does not ("34555-2671", which the lines after it make
// a phone number of), is held with them and masked as in the whole text: it went out as it was.
func TestStreamedItemTheNextLinesMake(t *testing.T) {
	c := newStreamedAsWhole(t)
	rng := rand.New(rand.NewPCG(34, 55))
	for _, text := range []string{"34555-2671\n1\n111111]0\n", "34555-2671\n１\n111111]0\n", "415-555-2671\n１\n111111]0\n"} {
		_, n := c.s.Redact(text)
		require.NotZero(t, n, "%q", text)
		c.checkCuts(t, text, rng)
	}
}
