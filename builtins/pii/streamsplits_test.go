package pii_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// splitCorpus are texts holding phone numbers, cards, social security numbers and addresses,
// with line breaks inside and around them, the separators they are written with, extensions,
// and escapes of their characters, and near misses of them.
var splitCorpus = []string{
	"+100000\n00X0",
	"+100000\n00X0\n",
	"Hello.\n+100000\n00X0 ok\nbye\n",
	"call (415)\n555-2671 x12\nbye",
	"call (415) 555\n2671 ext. 9\n",
	"office +44 20\n7946 0958\r\n+44 20\n7946 0958 x7\n",
	"+1 415\n555 2671\nok",
	"Card: 4111 1111\n1111 1111 ok\nbye",
	"4111-1111-1111-1111\n5555 5555\n5555 4444\n",
	"Card: 4111.1111\n1111.1111\n",
	"card\t4111\t1111\t1111\n1111\nok\n",
	"4111 1111 1111\n1111 1111\n",
	"my SSN is\n123456789\n",
	"SSN 123-45-6789\n123.45.6789\nok",
	"write to jane.doe@example.com\nor ann@example.org\n",
	"a &#52;&#49;&#49;&#49; 1111\n1111 1111 b\n",
	"call &#52;&#49;&#53;\n555-2671\n",
	"%2B44 20\n7946 0958\n",
	"IBAN GB29 NWBK\n6016 1331 9268 19 ok\n",
	"Fax:\n9498777106\nthanks",
	"4111 1111\u200b\n1111 1111\n",
	"Lines:\n1234\n5678\n9012\n3456\n",
	"rows\n12345\n2024-01-15\n",
	"+44 20\n7946 0958 +44 20\n7946 0958 +44 20\n7946 0958\n",
}

// randomChunks cuts text into a random number of chunks at random offsets, empty ones among
// them.
func randomChunks(rng *rand.Rand, text string) []string {
	cuts := []int{0, len(text)}
	for range rng.IntN(6) {
		cuts = append(cuts, rng.IntN(len(text)+1))
	}
	slices.Sort(cuts)
	var out []string
	for i := 1; i < len(cuts); i++ {
		out = append(out, text[cuts[i-1]:cuts[i]])
	}
	return out
}

// TestStreamedSplitsNeverLeak: whatever chunks a text is streamed in, what the layer lets out
// holds no item the detectors find in the whole text: with "redact" a value found goes out no
// more often than the text holds it outside the items found, and "block" ends the call
// before the first item. The texts of the corpus and random texts joining them, each cut at
// random offsets into chunks, empty ones among them.
func TestStreamedSplitsNeverLeak(t *testing.T) {
	c := newStreamedAsWhole(t)
	rng := rand.New(rand.NewPCG(11, 13))
	texts := append([]string(nil), splitCorpus...)
	for range 60 {
		texts = append(texts, splitCorpus[rng.IntN(len(splitCorpus))]+streamedText(rng)+splitCorpus[rng.IntN(len(splitCorpus))])
	}
	n := 40
	if testing.Short() {
		n = 10
	}
	for _, text := range texts {
		ms := c.s.Find(text)
		// allowed[v] is how often the value v may go out: as often as the text holds it
		// outside the items found
		allowed := map[string]int{}
		for _, m := range ms {
			allowed[text[m.Start:m.End]] = strings.Count(text, text[m.Start:m.End])
		}
		for _, m := range ms {
			allowed[text[m.Start:m.End]]--
		}
		for range n {
			deltas := randomChunks(rng, text)
			got, err := c.run(c.redact, deltas)
			require.NoError(t, err)
			for v, most := range allowed {
				assert.LessOrEqual(t, strings.Count(got, v), most, "redact: %q streamed as %q let %q out: %q", text, deltas, v, got)
			}
			got, err = c.run(c.block, deltas)
			if len(ms) == 0 {
				require.NoError(t, err)
				continue
			}
			assert.Error(t, err, "block: %q streamed as %q", text, deltas)
			assert.True(t, strings.HasPrefix(text[:ms[0].Start], got), "block: %q streamed as %q released %q", text, deltas, got)
		}
	}
}
