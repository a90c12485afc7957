package pii

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
)

// TestLongReadingsStayLinear: a column of numbers (a tool's output of counts, one a
// line), the same numbers as the strings of an array, and as the values of an object, are
// read in time proportional to their length: four times as many take under eight times as
// long (a quadratic reading takes sixteen; 16,000 one-digit lines took seconds). So is a
// tool message holding records as JSON text, whose runs of strings are read together (4,000
// records of an e-mail address each took seconds), and so is a run of digit groups joined by
// slashes or dots ("4/4/4/...": 4,000 groups took seconds), and so are lines each ending in a
// short number and a dot or a slash ("1.\n" 20,000 times took 18 s).
func TestLongReadingsStayLinear(t *testing.T) {
	s := newScanner(t)
	digits := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(i % 10)
		}
		return out
	}
	for name, read := range map[string]func(n int){
		"lines": func(n int) { s.Redact(strings.Join(digits(n), "\n") + "\n") },
		"array": func(n int) {
			a := make([]any, n)
			for i, d := range digits(n) {
				a[i] = d
			}
			s.RedactValue(a)
		},
		"object": func(n int) {
			m := map[string]any{}
			for i, d := range digits(n) {
				m["k"+strconv.Itoa(100000+i)] = d
			}
			s.RedactValue(m)
		},
		// a placeholder's opening with no "]" after it: each was read on to the next "]"
		"openings of placeholders": func(n int) { s.Find(strings.Repeat("[REDACTED:", 25*n) + "]") },
		// digits joined by slashes or dots, not laid out as a card's groups (a path of
		// numbers, a dotted run in a URL): each group started a reading of the whole run
		"digits joined by slashes": func(n int) { s.Find(strings.Repeat("4/", n)) },
		"digits joined by dots":    func(n int) { s.Find(strings.Repeat("4111.", n) + "4") },
		// lines each ending in a short number and a dot or a slash (a numbered list, a
		// column of fractions): each line started a reading of all the lines after it
		"lines ending in a digit and a dot":       func(n int) { s.Redact(strings.Repeat("1.\n", n)) },
		"lines ending in digits and a slash":      func(n int) { s.Redact(strings.Repeat("12/\n", n)) },
		"lines of dotted numbers ending in a dot": func(n int) { s.Redact(strings.Repeat("1.2.\n", n)) },
		"array as JSON text": func(n int) {
			b, _ := json.Marshal(digits(n))
			s.Redact(string(b))
		},
		"records as JSON text of a tool message": func(n int) {
			recs := make([]map[string]string, n)
			for i := range recs {
				recs[i] = map[string]string{"name": "user " + strconv.Itoa(i), "email": "u" + strconv.Itoa(i) + "@example.com"}
			}
			b, _ := json.Marshal(recs)
			tr := mask.Transcript{Mask: s.Redact, Find: s.items, System: true}
			out, _ := tr.Messages("", []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: string(b)}})
			assert.NotContains(t, out[0].Content, "@example.com")
		},
	} {
		t.Run(name, func(t *testing.T) {
			run := func(n int) time.Duration {
				return cputime.Of(func() { read(n) })
			}
			run(500) // warm up
			small, large := run(2000), run(8000)
			assert.Less(t, large, 8*small+100*time.Millisecond, "2,000 took %v, 8,000 %v", small, large)
		})
	}
}
