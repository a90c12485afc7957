package pii

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArraysOfBenignTextAreLeftAlone measures what reading the strings of an array as lines
// and run together costs in false detections: every text of the corpora in which Find finds
// nothing, handed over as an array of its words, of its lines and of chunks of 4, 8 and 16
// bytes, and arrays of numbers written as strings (ids of one length; codes of 4 to 10
// digits of mixed lengths; years), and records of codes (an object whose values, read in the
// order of its keys, are codes of mixed lengths, with an amount and a word among them or
// alone; four codes of four digits under an invoice's keys). At most 1% of the
// arrays of a set may hold a value read
// together that none of its elements holds alone (run together, codes of mixed lengths can
// make a number that passes a card's checks).
func TestArraysOfBenignTextAreLeftAlone(t *testing.T) {
	s := newScanner(t)
	var texts []string
	for _, path := range []string{"testdata/presidio/sample.jsonl", "testdata/recognizers/sample.jsonl"} {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r corpusRecord
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
			if len(s.Find(r.Text)) == 0 {
				texts = append(texts, r.Text)
			}
		}
		require.NoError(t, f.Close())
	}
	chunks := func(text string, n int) []any {
		var out []any
		for len(text) > n {
			out, text = append(out, text[:n]), text[n:]
		}
		return append(out, text)
	}
	split := func(text, sep string) []any {
		var out []any
		for _, w := range strings.Split(text, sep) {
			out = append(out, w)
		}
		return out
	}
	// flagged: arrays in which reading the elements together finds a value that no element
	// read alone holds; alone: arrays with an element that holds one read alone (a date read
	// as a phone number once its time is cut off), which reading together does not add.
	flagged, alone, total := map[string]int{}, map[string]int{}, map[string]int{}
	try := func(set string, arr []any) {
		if len(arr) < 2 {
			return
		}
		total[set]++
		for _, e := range arr {
			if len(s.Find(e.(string))) > 0 {
				alone[set]++
				return
			}
		}
		if red, n := s.RedactValue(map[string]any{"v": arr}); n > 0 {
			if testing.Verbose() && flagged[set] < 3 {
				t.Logf("%s: %q -> %q", set, arr, red.(map[string]any)["v"])
			}
			flagged[set]++
		}
	}
	for _, text := range texts {
		try("words", split(text, " "))
		try("lines", split(text, "\n"))
		for _, n := range []int{4, 8, 16} {
			try("chunks of "+strconv.Itoa(n), chunks(text, n))
		}
	}
	r := rand.New(rand.NewPCG(14, 4))
	rr := rand.New(rand.NewPCG(15, 4)) // the records' own, so that the arrays are those measured before
	for range 2000 {
		n, width := 2+r.IntN(6), 4+r.IntN(7)
		var ids, codes, years []any
		for range n {
			ids = append(ids, fmt.Sprintf("%0*d", width, r.IntN(int(math.Pow10(width)))))
			codes = append(codes, strconv.Itoa(r.IntN(int(math.Pow10(4+r.IntN(7))))))
			years = append(years, strconv.Itoa(1950+r.IntN(80)))
		}
		try("ids of one length", ids)
		try("codes of mixed lengths", codes)
		try("years", years)
		// a record of codes, read as the values of an object in the order of its keys
		code := func(lo, hi int) string { return strconv.Itoa(rr.IntN(int(math.Pow10(lo + rr.IntN(hi-lo+1))))) }
		tryRecord := func(set string, record map[string]any) {
			total[set]++
			if slices.ContainsFunc(slices.Collect(maps.Values(record)), func(v any) bool { return len(s.Find(v.(string))) > 0 }) {
				alone[set]++
			} else if red, n := s.RedactValue(record); n > 0 {
				if testing.Verbose() && flagged[set] < 3 {
					t.Logf("%s: %q -> %q", set, record, red)
				}
				flagged[set]++
			}
		}
		tryRecord("records of codes", map[string]any{"account": code(6, 12), "amount": fmt.Sprintf("%d.%02d", rr.IntN(10000), rr.IntN(100)),
			"id": code(4, 10), "name": "Order", "order": code(4, 10), "zip": fmt.Sprintf("%05d", rr.IntN(100000))})
		tryRecord("records of codes alone", map[string]any{"id": code(4, 10), "order": code(4, 10), "zip": fmt.Sprintf("%05d", rr.IntN(100000))})
	}
	// records of four codes of four digits, side by side in the order of their keys as a card's
	// groups are in a payment form's boxes, under keys that name no card's parts
	rc := rand.New(rand.NewPCG(16, 4))
	four := func() string { return fmt.Sprintf("%04d", rc.IntN(10000)) }
	for range 10000 {
		record := map[string]any{"invoice": four(), "line": four(), "sku": four(), "qty": four()}
		total["records of four codes"]++
		if red, n := s.RedactValue(record); n > 0 {
			if testing.Verbose() && flagged["records of four codes"] < 3 {
				t.Logf("records of four codes: %q -> %q", record, red)
			}
			flagged["records of four codes"]++
		}
	}
	for _, set := range slices.Sorted(maps.Keys(total)) {
		t.Logf("%-24s %5d arrays, %3d flagged read together (%.1f%%), %3d with an element flagged alone",
			set, total[set], flagged[set], 100*float64(flagged[set])/float64(total[set]), alone[set])
		assert.LessOrEqual(t, flagged[set]*100, total[set], "%s: more than 1%% flagged", set)
	}
}
