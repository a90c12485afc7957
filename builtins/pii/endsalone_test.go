package pii

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestItemsAcrossAfterBlankLines: a cut held back to the line of "+44 20 7946 0958", which
// the line after it unmakes, has the part before it read alone; when that part ends in more
// blank lines than the window it is read in, the reading is of no item (it panicked, its
// window ending before it started), and the cut stays at the number's line.
func TestItemsAcrossAfterBlankLines(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	for _, blanks := range []string{strings.Repeat("\n", 300), strings.Repeat(" \r\n", 100), "\n\n\n"} {
		buf := "hello\n" + blanks + "+44 20 7946 0958\n12 ok"
		cut := strings.Index(buf, "12 ok")
		require.NotPanics(t, func() {
			require.Equal(t, strings.Index(buf, "+44"), itemsAcross(s, phoneMemo{}, "", buf, cut, 0), "%d blanks", len(blanks))
		})
	}
}
