package pii_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
)

// streamPieces are the parts streamedText joins: the groups of phone numbers, cards, IBANs
// and addresses, the words that name them, and the gaps that may stand between groups.
var streamPieces = []string{
	"call ", "phone: ", "Fax:\n", "my SSN is ", "tel", "(415)", "415", "555-2671", "555 2671", "+44 20", "+44",
	"7946 0958", "20 7946 0958", "+1", "4111 1111", "1111 1111", "4111", "1111", "GB29 NWBK", "6016 1331 9268 19",
	"jane.doe", "@", "example.com", "123456789", "123-45-6789", "12345", "2024-01-15", "ok", "bye",
	" ", " ", "  ", "\n", "\n", "\r\n", "-", ".", "(", ")", "row 7: ",
}

// streamedText joins a few random streamPieces.
func streamedText(rng *rand.Rand) string {
	var b strings.Builder
	for range 3 + rng.IntN(9) {
		b.WriteString(streamPieces[rng.IntN(len(streamPieces))])
	}
	return b.String()
}

// streamedAsWhole checks that text streamed as deltas goes out of the layer as the whole text
// is masked: with "redact" as Redact masks it, with "block" as it is when Find finds nothing,
// else ended by a block before the first item.
type streamedAsWhole struct {
	s             *pii.Scanner
	model         *chunkModel
	redact, block *runtime.Pipeline
}

func newStreamedAsWhole(t testing.TB) *streamedAsWhole {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	model := &chunkModel{}
	return &streamedAsWhole{s: s, model: model,
		redact: chatPipeline(t, `{"action":"redact"}`, model), block: chatPipeline(t, `{"action":"block"}`, model)}
}

func (c *streamedAsWhole) run(pl *runtime.Pipeline, deltas []string) (string, error) {
	c.model.deltas = deltas
	var got strings.Builder
	_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
		func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
	return got.String(), err
}

func (c *streamedAsWhole) check(t testing.TB, text string, deltas []string) {
	t.Helper()
	want, _ := c.s.Redact(text)
	got, err := c.run(c.redact, deltas)
	require.NoError(t, err)
	require.Equal(t, want, got, "redact: %q streamed as %q", text, deltas)
	got, err = c.run(c.block, deltas)
	ms := c.s.Find(text)
	if len(ms) == 0 {
		require.NoError(t, err, "block: %q streamed as %q", text, deltas)
		require.Equal(t, text, got)
		return
	}
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "block: %q streamed as %q", text, deltas)
	require.True(t, strings.HasPrefix(text[:ms[0].Start], got), "block: %q streamed as %q released %q", text, deltas, got)
}

// TestStreamedPhonesMaskedAsWhole: a text the model streams goes out of the layer as Redact
// masks the whole text, in one delta, cut in two at every byte or in three: a phone number
// whose area code or country code ends a line is held with the next line, and a phone word,
// an SSN's label, on the lines released before still counts for the number after it.
func TestStreamedPhonesMaskedAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"Hello.\ncall (415)\n555-2671 now\nbye",
		"Hello.\ncall (415)\r\n555-2671 now\n",
		"Hello.\noffice +44 20\n7946 0958\nbye",
		"Hello.\noffice +44\n20 7946 0958\n",
		"Hello.\ncall 415-555\n2671 now\n",
		"Hello.\ncall me on\n9472 7916\nbye",
		"Hello.\nFax:\n9498777106\n",
		"Hello.\nmy SSN is\n123456789\n",
		"Hello.\nphone\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n9472 7916\n",
	} {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			_, n := c.s.Redact(text)
			require.NotZero(t, n, "the whole text holds a phone number")
			c.check(t, text, []string{text})
			for i := 0; i <= len(text); i++ {
				c.check(t, text, []string{text[:i], text[i:]})
				for j := i; j <= len(text) && len(text) < 48; j++ {
					c.check(t, text, []string{text[:i], text[i:j], text[j:]})
				}
			}
		})
	}
}

// TestStreamedOutputMaskedAsWhole: random texts of phone numbers, cards, IBANs, addresses and
// the words that name them, their groups joined by spaces, line breaks or nothing, go out of
// the layer exactly as the whole text is masked, whether they arrive in one delta, cut in
// two at every byte, or a few bytes a delta.
func TestStreamedOutputMaskedAsWhole(t *testing.T) {
	newStreamedAsWhole(t).checkTexts(t, rand.New(rand.NewPCG(3, 5)), 150, streamedText)
}

// checkTexts checks n texts text makes (a fifth of them with -short) with checkCuts.
func (c *streamedAsWhole) checkTexts(t testing.TB, rng *rand.Rand, n int, text func(*rand.Rand) string) {
	t.Helper()
	if testing.Short() {
		n /= 5
	}
	for range n {
		c.checkCuts(t, text(rng), rng)
	}
}

// checkCuts checks text in one delta, cut in two at every byte, and a few bytes a delta.
func (c *streamedAsWhole) checkCuts(t testing.TB, text string, rng *rand.Rand) {
	t.Helper()
	c.check(t, text, []string{text})
	for cut := 1; cut < len(text); cut++ {
		c.check(t, text, []string{text[:cut], text[cut:]})
	}
	var deltas []string
	for i := 0; i < len(text); {
		k := min(len(text), i+1+rng.IntN(4))
		deltas = append(deltas, text[i:k])
		i = k
	}
	c.check(t, text, deltas)
}

// FuzzStreamedOutput: any text, cut anywhere into three deltas, goes out of the layer as the
// whole text is masked.
func FuzzStreamedOutput(f *testing.F) {
	f.Add("Hello.\ncall (415)\n555-2671 now", 10, 20)
	f.Add("office +44 20\n7946 0958\n", 3, 14)
	f.Add("call me on\n9472 7916\nbye", 11, 12)
	f.Add("card 4111 1111\n1111 1111 ok", 9, 15)
	f.Add("jane.doe@example.com\n", 8, 9)
	f.Add("call 415-555-\n2671 ssn 123 - 45 - \n6789 card 4111  1111\n1111 1111", 12, 30)
	c := newStreamedAsWhole(f)
	f.Fuzz(func(t *testing.T, text string, a, b int) {
		if len(text) > 256 || !utf8.ValidString(text) {
			return
		}
		a, b = min(max(a, 0), len(text)), min(max(b, 0), len(text))
		a, b = min(a, b), max(a, b)
		c.check(t, text, []string{text[:a], text[a:b], text[b:]})
	})
}

// contextItems are items whose placeholder holds a word that names an item
// ("[REDACTED:phone]", "[REDACTED:card]", "[REDACTED:ssn]") or a digit ("[REDACTED:ipv4]"),
// and others; contextNumbers are numbers such a word would make an item of; contextGaps
// may stand between them.
var (
	contextItems = []string{
		"(415) 555-2671", "415-555-2671", "+44 20 7946 0958", "4111 1111 1111 1111", "4111111111111111",
		"123-45-6789", "10.0.0.1", "fe80::1", "jane.doe@example.com", "GB29 NWBK 6016 1331 9268 19",
	}
	contextNumbers = []string{"94727916", "9472 7916", "9498777106", "123456789", "4111 1111", "1111 1111", "5555", "12"}
	contextGaps    = []string{" ", "  ", "\n", "\n\n", ": ", ", ok\n", " ok ", " x\n", "; ", "-", "\r\n", "call ", "card "}
)

// contextText joins a few items, numbers and gaps: each item is followed by a gap and a
// number or another item.
func contextText(rng *rand.Rand) string {
	var b strings.Builder
	for range 1 + rng.IntN(3) {
		b.WriteString(contextItems[rng.IntN(len(contextItems))])
		for range 1 + rng.IntN(2) {
			b.WriteString(contextGaps[rng.IntN(len(contextGaps))])
			if rng.IntN(3) == 0 {
				b.WriteString(contextItems[rng.IntN(len(contextItems))])
			} else {
				b.WriteString(contextNumbers[rng.IntN(len(contextNumbers))])
			}
		}
		b.WriteString(contextGaps[rng.IntN(len(contextGaps))])
	}
	return b.String()
}

// TestStreamedPlaceholdersNameNothing: a number next to an item whose placeholder holds a word
// that names an item ("415-555-2671 94727916", "[REDACTED:phone] 94727916" once the first is
// masked) goes out of the layer as Redact masks the whole text, whatever the cuts: a
// placeholder the scanner wrote is no word and no part of an item, in the whole text as in
// the stream, where the line before is read as the model wrote it.
func TestStreamedPlaceholdersNameNothing(t *testing.T) {
	newStreamedAsWhole(t).checkTexts(t, rand.New(rand.NewPCG(11, 17)), 300, contextText)
}

// TestStreamedGroupsAfterDigitsAsWhole: a line that starts with an item read alone, which the
// whole text reads with the digit groups that end the line before it ("...-6789" then "4111
// 1111 1111 1111", a run of groups no card), goes out as the whole text is masked: read after
// the line before, though no word there names an item.
func TestStreamedGroupsAfterDigitsAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	rng := rand.New(rand.NewPCG(2, 9))
	for _, text := range []string{
		"jane.doe@example.com-123-45-6789\n4111 1111 1111 1111 ok 123-45-6789, ok\n415-555-2671\n",
		"ref 2024-0958-6789\n4111 1111 1111 1111 ok\n415-555-2671\n",
	} {
		c.checkCuts(t, text, rng)
		c.check(t, text, []string{"", text})
	}
}
