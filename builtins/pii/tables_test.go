package pii

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numberTable writes rows of numbers of width digits (of 3 to 10 when width is 0, each
// column its own) laid out as layout says: "space", "tab", "aligned" (columns padded with
// two spaces or more), "padded" (columns right-aligned, one space or more before each:
// single and wider gaps in one row), "pipes" (" | ").
func numberTable(r *rand.Rand, layout string, rows, cols, width int) string {
	widths := make([]int, cols)
	for c := range widths {
		widths[c] = width
		if width == 0 {
			widths[c] = 3 + r.IntN(8)
		}
	}
	var b strings.Builder
	for range rows {
		for c, w := range widths {
			n := fmt.Sprintf("%d", r.Int64N(int64(pow10(w)))) // no leading zeros: as a number prints
			switch {
			case c == 0:
			case layout == "space":
				b.WriteString(" ")
			case layout == "tab":
				b.WriteString("\t")
			case layout == "pipes":
				b.WriteString(" | ")
			case layout == "aligned":
				b.WriteString(strings.Repeat(" ", 2+w-len(n)))
			case layout == "padded":
				b.WriteString(strings.Repeat(" ", 1+w-len(n)))
			}
			b.WriteString(n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}

// TestCardsInTablesOfNumbers measures what the card detector takes in tables of numbers: rows
// of random numbers (of one width of 3 to 8 digits, or of mixed widths), laid out with single
// spaces, tabs, aligned by spaces, or between pipes. A row whose adjacent numbers, joined
// alike, make a number of a card's length that starts like a card and passes the Luhn check
// (one in ten does) is one a card printed so would be. Joined by tabs, aligned by spaces or
// set between pipes, a row is read as a card only when the whole row is a card's groups as
// printed and a word naming a card is written before it: none of such tables may hold one. Joined by single spaces, groups are read
// on over line breaks, as a card wrapped after a group is: over a quarter of the tables of
// random numbers (565 of 2,000) hold a card so, and tableFloors bounds that figure at a third.
var tableFloors = map[string]int{"space": 33, "tab": 0, "aligned": 0, "padded": 33, "pipes": 0}

func TestCardsInTablesOfNumbers(t *testing.T) {
	s := newScanner(t, KindCard)
	r := rand.New(rand.NewPCG(21, 7))
	for _, layout := range []string{"space", "tab", "aligned", "padded", "pipes"} {
		flagged, total := 0, 0
		for range 2000 {
			width := 0
			if r.IntN(2) == 0 {
				width = 3 + r.IntN(6)
			}
			table := numberTable(r, layout, 5, 2+r.IntN(6), width)
			total++
			if ms := s.Find(table); len(ms) > 0 {
				if testing.Verbose() && flagged < 3 {
					t.Logf("%s: %q", layout, table[ms[0].Start:ms[0].End])
				}
				flagged++
			}
		}
		t.Logf("%-8s %4d tables, %3d with a card found (%.1f%%)", layout, total, flagged, 100*float64(flagged)/float64(total))
		assert.LessOrEqual(t, flagged*100, tableFloors[layout]*total, "%s: more than %d%% of the tables", layout, tableFloors[layout])
	}
}

// TestCardsInRowsOfFourNumbers: rows of four numbers of four digits after a label, joined by
// tabs, several spaces or colons (a quarter's figures), and tables of them, hold no card
// unless a word naming one is written before it; written so after "card", a card is found.
func TestCardsInRowsOfFourNumbers(t *testing.T) {
	s := newScanner(t, KindCard)
	r := rand.New(rand.NewPCG(1, 1))
	for _, sep := range []string{"\t", "  ", "   ", ":"} {
		for range 5000 {
			row := fmt.Sprintf("Sales%s%d%s%d%s%d%s%d\n", sep, 1000+r.IntN(9000), sep, 1000+r.IntN(9000), sep, 1000+r.IntN(9000), sep, 1000+r.IntN(9000))
			require.Empty(t, s.Find(row), "%q", row)
		}
		card := "card " + strings.Join([]string{"4111", "1111", "1111", "1111"}, sep)
		assert.Len(t, s.Find(card), 1, "%q", card)
	}
	for _, row := range []string{"Sales\t4520\t4810\t5230\t5120\n", "4520\t4810\t5230\t5120\n", "Region  4520  4810  5230  5121\n"} {
		assert.Empty(t, s.Find(row), "%q", row)
	}
	for range 1000 {
		var b strings.Builder
		b.WriteString("Region\tQ1\tQ2\tQ3\tQ4\n")
		for _, reg := range []string{"North", "South", "East", "West", "Central", "Online", "Retail", "Export", "Other", "Misc"} {
			fmt.Fprintf(&b, "%s\t%d\t%d\t%d\t%d\n", reg, 1000+r.IntN(9000), 1000+r.IntN(9000), 1000+r.IntN(9000), 1000+r.IntN(9000))
		}
		require.Empty(t, s.Find(b.String()), "%q", b.String())
	}
}

// TestCardsInBenignCorpora lists the cards found in the texts of the injection corpus (its
// table contexts among them): the payment provider's test numbers one of its documents quotes,
// and nothing else.
func TestCardsInBenignCorpora(t *testing.T) {
	s := newScanner(t, KindCard)
	paths, err := filepath.Glob("../security/testdata/corpus/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	texts := 0
	var found []string
	for _, path := range paths {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<22), 1<<22)
		for sc.Scan() {
			var r struct{ Text string }
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
			texts++
			for _, m := range s.Find(r.Text) {
				found = append(found, r.Text[m.Start:m.End])
			}
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	t.Logf("%d texts, %d cards found", texts, len(found))
	require.ElementsMatch(t, []string{"4111111111111111", "378282246310005", "30569309025904"}, found)
}
