package pii

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	oldrand "math/rand"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// validCard returns a card number of the given IIN prefix and length that passes Luhn.
func validCard(r *rand.Rand, prefix string, length int) string {
	digits := []byte(prefix)
	for len(digits) < length-1 {
		digits = append(digits, byte('0'+r.IntN(10)))
	}
	for c := byte('0'); c <= '9'; c++ {
		d := append(digits, c)
		ds := make([]byte, len(d))
		for i := range d {
			ds[i] = d[i] - '0'
		}
		if luhn(ds) {
			return string(d)
		}
	}
	panic("unreachable")
}

// cardSamples are IIN prefixes with the lengths and print layouts their networks use.
var cardSamples = []struct {
	prefix string
	length int
	layout []int
}{
	{"4", 16, []int{4, 4, 4, 4}},
	{"4", 13, []int{4, 4, 5}},
	{"4", 19, []int{4, 4, 4, 4, 3}},
	{"51", 16, []int{4, 4, 4, 4}},
	{"2221", 16, []int{4, 4, 4, 4}},
	{"2720", 16, []int{4, 4, 4, 4}},
	{"34", 15, []int{4, 6, 5}},
	{"37", 15, []int{4, 6, 5}},
	{"6011", 16, []int{4, 4, 4, 4}},
	{"65", 16, []int{4, 4, 4, 4}},
	{"36", 14, []int{4, 6, 4}},
	{"3530", 16, []int{4, 4, 4, 4}},
	{"62", 19, []int{4, 4, 4, 4, 3}},
	{"50", 12, []int{4, 4, 4}},
	{"6759", 18, []int{4, 4, 4, 6}},
	{"2200", 16, []int{4, 4, 4, 4}},
}

// formatCard writes a card plain or in its layout joined by sep.
func formatCard(card string, layout []int, sep string) string {
	if sep == "" {
		return card
	}
	var parts []string
	at := 0
	for _, n := range layout {
		parts = append(parts, card[at:at+n])
		at += n
	}
	return strings.Join(parts, sep)
}

func TestAdjacentCardsAreAllFound(t *testing.T) {
	s := newScanner(t)
	for text, want := range map[string]int{
		"4111111111111111 4111111111111111":                 2,
		"cards: 4111 1111 1111 1111 5555 5555 5555 4444":    2,
		"4111-1111-1111-1111-5555-5555-5555-4444":           2,
		"378282246310005 6011111111111117 5555555555554444": 3,
	} {
		ms := s.Find(text)
		assert.Len(t, ms, want, text)
		red, n := s.Redact(text)
		assert.Equal(t, want, n, text)
		assert.NotRegexp(t, `\d`, red, text)
	}
	text := "cards: 4111 1111 1111 1111 5555 5555 5555 4444"
	assert.Equal(t, []string{"card:4111 1111 1111 1111", "card:5555 5555 5555 4444"}, found(text, s.Find(text)))
}

// TestConcatenatedCardsAreAllFound checks, over seeded random concatenations of valid cards
// of every network (plain or in their print layout, joined by the same or another
// separator), that one scan covers every digit of every card, and reports each card as one
// match wherever the layout is unambiguous.
func TestConcatenatedCardsAreAllFound(t *testing.T) {
	s := newScanner(t, KindCard)
	r := rand.New(rand.NewPCG(14, 1))
	joins := []string{" ", ", ", "; ", " and ", "\n", " / "}
	for iter := 0; iter < 5000; iter++ {
		n := 1 + r.IntN(6)
		inner := []string{"", " ", "-"}[r.IntN(3)]
		join := joins[r.IntN(len(joins))]
		if r.IntN(2) == 0 && inner != "" {
			join = inner
		}
		var b strings.Builder
		b.WriteString([]string{"", "cards: ", "pay with ", "(", "no. "}[r.IntN(5)])
		var want []string
		for k := 0; k < n; k++ {
			if k > 0 {
				b.WriteString(join)
			}
			c := cardSamples[r.IntN(len(cardSamples))]
			card := validCard(r, c.prefix, c.length)
			text := formatCard(card, c.layout, inner)
			want = append(want, "card:"+text)
			b.WriteString(text)
		}
		b.WriteString([]string{"", ".", " thanks", ")"}[r.IntN(4)])
		text := b.String()
		ms := s.Find(text)
		got := found(text, ms)
		covered := make([]bool, len(text))
		for _, m := range ms {
			for k := m.Start; k < m.End; k++ {
				covered[k] = true
			}
		}
		for k := range text {
			require.False(t, isDigit(text[k]) && !covered[k], "iteration %d: digit %d of %q is in no card: %v", iter, k, text, got)
		}
		if join != inner || inner == "" {
			// the cards are separate runs, or one-group cards: each is exactly one match
			require.Equal(t, want, got, "iteration %d: %q", iter, text)
		}
	}
}

// randomPIIText builds a text from random fragments.
func randomPIIText(r *rand.Rand) string {
	frags := []func() string{
		func() string {
			c := cardSamples[r.IntN(len(cardSamples))]
			return formatCard(validCard(r, c.prefix, c.length), c.layout, []string{"", " ", "-"}[r.IntN(3)])
		},
		func() string { return strconv.Itoa(r.IntN(1_000_000_000)) },
		func() string { return strings.Repeat(strconv.Itoa(r.IntN(10)), 1+r.IntN(20)) },
		func() string { return "jane" + strconv.Itoa(r.IntN(100)) + "@example.com" },
		func() string { return "user@bücher.example" },
		func() string { return "415-555-" + strconv.Itoa(1000+r.IntN(9000)) },
		func() string { return "+44 20 7946 " + strconv.Itoa(1000+r.IntN(9000)) },
		func() string { return "123-45-" + strconv.Itoa(1000+r.IntN(9000)) },
		func() string {
			return strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(r.IntN(256))
		},
		func() string { return "2001:db8::" + strconv.FormatInt(int64(r.IntN(65536)), 16) },
		func() string {
			return []string{"DE89 3704 0044 0532 0130 00", "GB29NWBK60161331926819", "fr1420041010050500013m02606", "٤١١١ ١١١١ ١١١١ ١١١١", "jane%40example.com"}[r.IntN(5)]
		},
		func() string {
			return []string{"the", "card", "SSN", "call", "ORD", "v", "x", "de ad be ef", "0000:"}[r.IntN(9)]
		},
	}
	seps := []string{"", " ", "  ", "-", ".", ",", "/", ":", "@", "\n", "(", ")", "+"}
	var b strings.Builder
	for k := r.IntN(12); k >= 0; k-- {
		b.WriteString(frags[r.IntN(len(frags))]())
		b.WriteString(seps[r.IntN(len(seps))])
	}
	return b.String()
}

// TestRedactLeavesNoDetectedValue is a property test: for any text, no value Find reports
// survives Redact (nothing detectable is left, and a value only remains where it also occurs
// outside every match of the original), and the matches are ordered and disjoint.
func TestRedactLeavesNoDetectedValue(t *testing.T) {
	s := newScanner(t)
	check := func(text string) bool {
		ms := s.Find(text)
		for i, m := range ms {
			if m.Start >= m.End || (i > 0 && ms[i-1].End > m.Start) {
				t.Logf("bad spans in %q: %v", text, ms)
				return false
			}
		}
		red, n := s.Redact(text)
		if n < len(ms) {
			return false
		}
		if again := s.Find(red); len(again) > 0 {
			t.Logf("%q redacts to %q, which still holds %v", text, red, found(red, again))
			return false
		}
		for _, m := range ms {
			v := text[m.Start:m.End]
			if strings.Count(red, v) > strayOccurrences(text, v, ms) {
				t.Logf("%q survives redaction of %q: %q", v, text, red)
				return false
			}
		}
		return true
	}
	r := rand.New(rand.NewPCG(14, 2))
	cfg := &quick.Config{
		MaxCount: 4000,
		Values: func(args []reflect.Value, _ *oldrand.Rand) {
			args[0] = reflect.ValueOf(randomPIIText(r))
		},
	}
	require.NoError(t, quick.Check(check, cfg))
	// and on texts carrying one in base64 or hex
	cfg.Values = func(args []reflect.Value, _ *oldrand.Rand) {
		args[0] = reflect.ValueOf(randomPIIText(r) + " data=" + randomEncoding(r, randomPIIText(r)) + " end")
	}
	require.NoError(t, quick.Check(check, cfg))
	// and on arbitrary strings
	require.NoError(t, quick.Check(check, &quick.Config{MaxCount: 2000}))
}

// TestRedactValueLeavesNoValueCutAcrossElements is a property test: a text cut at random
// points into consecutive strings of an array, nested in objects, holds after RedactValue
// none of the values Find reports in the whole text, read run together or joined by line
// breaks, where the value does not also occur outside every match.
func TestRedactValueLeavesNoValueCutAcrossElements(t *testing.T) {
	s := newScanner(t)
	r := rand.New(rand.NewPCG(14, 3))
	for iter := 0; iter < 3000; iter++ {
		text := randomPIIText(r)
		if iter%4 == 3 {
			text += " data=" + randomEncoding(r, randomPIIText(r))
		}
		ms := s.Find(text)
		if len(ms) == 0 || len(text) < 2 {
			continue
		}
		var elems []any
		for _, e := range cutAtRandom(r, text) {
			elems = append(elems, e)
		}
		v := map[string]any{"rows": []any{map[string]any{"id": 7.0, "text": elems}}}
		red, _ := s.RedactValue(v)
		out := red.(map[string]any)["rows"].([]any)[0].(map[string]any)["text"].([]any)
		pieces := make([]string, len(out))
		for i, e := range out {
			pieces[i] = e.(string)
		}
		for _, sep := range []string{"", "\n"} {
			got := strings.Join(pieces, sep)
			for _, m := range ms {
				val := text[m.Start:m.End]
				require.LessOrEqual(t, strings.Count(got, val), strayOccurrences(text, val, ms),
					"iteration %d: %q survives in %q, cut into %q", iter, val, got, elems)
			}
		}
	}
}

// cutAtRandom cuts text into pieces of 1 to 13 bytes, consecutive ones of different lengths:
// whole elements of digits of one length are a list of numbers (mask.ReadElements), not a
// value cut.
func cutAtRandom(r *rand.Rand, text string) []string {
	var out []string
	for rest, last := text, 0; rest != ""; {
		n := 1 + r.IntN(12)
		if n == last {
			n++
		}
		n = min(len(rest), n)
		out, rest, last = append(out, rest[:n]), rest[n:], n
	}
	return out
}

// randomEncoding writes text in one of the encodings Find reads.
func randomEncoding(r *rand.Rand, text string) string {
	b := []byte(text)
	switch r.IntN(5) {
	case 0:
		return base64.StdEncoding.EncodeToString(b)
	case 1:
		return base64.RawURLEncoding.EncodeToString(b)
	case 2:
		return hex.EncodeToString(b)
	case 3:
		return "/files/" + base64.RawStdEncoding.EncodeToString(b)
	}
	return base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(b)))
}

// strayOccurrences counts the occurrences of v in text that overlap no match.
func strayOccurrences(text, v string, ms []Match) int {
	n := 0
	for at := 0; ; {
		k := strings.Index(text[at:], v)
		if k < 0 {
			return n
		}
		s, e := at+k, at+k+len(v)
		inside := false
		for _, m := range ms {
			if s < m.End && m.Start < e {
				inside = true
				break
			}
		}
		if !inside {
			n++
		}
		at = s + 1
	}
}

// TestObjectTextBlockedIsMasked is a property test through the layer: a text of personal
// data cut at random points into the string values of an object, written as JSON in a tool
// message with its keys out of order (the model reads the values as written), is either let
// through by "block", or refused by it and sent by "redact" with nothing left that "block"
// refuses, and with no value "block" finds cut across the values in clear, read run together
// or as lines.
func TestObjectTextBlockedIsMasked(t *testing.T) {
	s := newScanner(t)
	block, redact := layerPipeline(t, `{}`), layerPipeline(t, `{"action":"redact"}`)
	r := rand.New(rand.NewPCG(14, 4))
	refused, cuts := 0, 0
	for iter := 0; iter < 1500; iter++ {
		text := randomPIIText(r)
		if len(text) < 2 {
			continue
		}
		vals := cutAtRandom(r, text)
		// keys in an order other than written; now and then a number between two values,
		// which ends a run of values read together
		var b strings.Builder
		b.WriteString("{")
		runs, keys := [][]string{nil}, [][]string{nil}
		for i, v := range vals {
			if i > 0 {
				b.WriteString(", ")
				if r.IntN(8) == 0 {
					b.WriteString(`"num` + strconv.Itoa(i) + `": 7, `)
					runs, keys = append(runs, nil), append(keys, nil)
				}
			}
			q, err := json.Marshal(v)
			require.NoError(t, err)
			key := fmt.Sprintf("%c%d", 'z'-rune(i%26), i)
			fmt.Fprintf(&b, `"%s": %s`, key, q)
			var read string // as the JSON text holds it: a byte of a character cut is U+FFFD
			require.NoError(t, json.Unmarshal(q, &read))
			runs[len(runs)-1] = append(runs[len(runs)-1], read)
			keys[len(keys)-1] = append(keys[len(keys)-1], key)
		}
		b.WriteString("}")
		content := b.String()
		// the runs read in one reading find a value cut across values exactly when the runs
		// read one by one do
		cut := false
		for i, run := range runs {
			_, found := mask.ReadFields(run, keys[i], s.items)
			cut = cut || slices.ContainsFunc(found, func(it mask.ElementItem) bool { return it.Elem < 0 })
		}
		_, split := mask.SplitInJSON(content, s.items)
		require.Equal(t, cut, split, "iteration %d: %s", iter, content)
		if cut {
			cuts++
		}
		msgs := []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: content}}
		seen, blocked := blockedIsMasked(t, block, redact, msgs, iter, content)
		if !blocked {
			continue
		}
		refused++
		got, err := jsonvalue.DecodeOrdered(seen[0].Content)
		if err != nil {
			got = seen[0].Content // masked as a text, no value cut across
		}
		outRuns := [][]string{nil}
		collectRuns(got, &outRuns)
		require.Len(t, outRuns, len(runs), "iteration %d: %s reached the model as %s", iter, content, seen[0].Content)
		for i, run := range runs {
			for _, val := range splitValues(s, run, keys[i]) {
				for _, sep := range []string{"", "\n"} {
					// the value is masked where it was found (it may be written again where no
					// reading finds it)
					if in := strings.Count(strings.Join(run, sep), val); in > 0 {
						assert.Less(t, strings.Count(strings.Join(outRuns[i], sep), val), in,
							"iteration %d: %q in %s reached the model as %s", iter, val, content, seen[0].Content)
					}
				}
			}
		}
	}
	t.Logf("%d objects refused by block, %d with a value cut across values", refused, cuts)
	require.Positive(t, cuts)
}

// blockedIsMasked sends msgs through block and, when it refuses them, through redact, and
// checks that block lets through what redact sent, which it returns (doc names the input, of
// iteration iter, in a failure); blocked is false when block let msgs through.
func blockedIsMasked(t *testing.T, block, redact *layerThrough, msgs []runtime.Message, iter int, doc string) (seen []runtime.Message, blocked bool) {
	t.Helper()
	if _, err := seenThrough(block, msgs); err == nil {
		return nil, false
	}
	seen, err := seenThrough(redact, msgs)
	require.NoError(t, err)
	_, err = seenThrough(block, seen)
	got, _ := json.Marshal(seen)
	require.NoError(t, err, "iteration %d: %s reached the model as %s", iter, doc, got)
	return seen, true
}

// splitValues returns the values ReadFields finds cut across vals, the values of keys, as
// written in them.
func splitValues(s *Scanner, vals, keys []string) []string {
	var out []string
	_, found := mask.ReadFields(vals, keys, s.items)
	lines, together := strings.Join(vals, "\n"), strings.Join(vals, "")
	for _, it := range found {
		if it.Elem >= 0 {
			continue
		}
		for _, text := range []string{lines, together} {
			if it.To <= len(text) && slices.ContainsFunc(s.items(text), func(m mask.Item) bool { return m.From == it.From && m.To == it.To }) {
				out = append(out, text[it.From:it.To])
				break
			}
		}
	}
	return out
}

// collectRuns appends the strings of a value DecodeOrdered returned to the last run of runs,
// in order, another value starting a run.
func collectRuns(v any, runs *[][]string) {
	switch x := v.(type) {
	case string:
		(*runs)[len(*runs)-1] = append((*runs)[len(*runs)-1], x)
	case []any:
		for _, e := range x {
			collectRuns(e, runs)
		}
	case jsonvalue.Object:
		for _, e := range x.Values {
			collectRuns(e, runs)
		}
	default:
		*runs = append(*runs, nil)
	}
}

// layerThrough is a pii layer configured by config in front of a model that keeps what it
// was sent.
type layerThrough struct {
	pl   *runtime.Pipeline
	last []runtime.Message
}

func layerPipeline(t *testing.T, config string) *layerThrough {
	t.Helper()
	lt := &layerThrough{}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("privacy", rt.Layer("pii", config))}})
	model := runtime.ModelFunc(func(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		lt.last = slices.Clone(req.Messages)
		yield(runtime.Delta{Text: "ok"})
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	lt.pl = pl
	return lt
}

// seenThrough sends msgs through the layer and returns what its model received.
func seenThrough(lt *layerThrough, msgs []runtime.Message) ([]runtime.Message, error) {
	lt.last = nil
	if _, err := lt.pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs}); err != nil {
		return nil, err
	}
	return lt.last, nil
}

// TestRedactLeavesNoValueCutAcrossATurn is a property test: a text of personal data cut at a
// random point into a tool result and the user's text after it (a tool message and a user
// message, or one user message with a tool_result part and a text part: one user turn to
// Anthropic's API), or into two consecutive user messages, holds after the layer's masking
// (mask.Transcript.AcrossParts, then Messages) none of the values Find reports in the whole
// text, read run together or joined by a line break, where the value does not also occur
// outside every match; and "block" refuses every such call that holds one cut across the
// two (AcrossParts finds it).
func TestRedactLeavesNoValueCutAcrossATurn(t *testing.T) {
	s := newScanner(t)
	tr := mask.Transcript{Mask: s.Redact, Find: s.items, System: true}
	r := rand.New(rand.NewPCG(14, 4))
	for iter := 0; iter < 3000; iter++ {
		text := randomPIIText(r)
		ms := s.Find(text)
		if len(ms) == 0 || len(text) < 2 {
			continue
		}
		cut := 1 + r.IntN(len(text)-1)
		a, b := text[:cut], text[cut:]
		for _, msgs := range [][]runtime.Message{
			{{Role: "tool", ToolCallID: "c1", Content: a}, {Role: "user", Content: b}},
			{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: a}, {Type: runtime.PartText, Text: b}}}},
			{{Role: "user", Content: a}, {Role: "user", Content: b}},
		} {
			joined, _ := tr.AcrossParts(msgs, s.items, true)
			out, _ := tr.Messages("", joined)
			var pieces []string
			for _, m := range out {
				for _, p := range m.Parts {
					if p.Type == runtime.PartToolResult {
						pieces = append(pieces, p.Text)
					}
				}
				pieces = append(pieces, m.Content)
				for _, p := range m.Parts {
					if p.Type == runtime.PartText {
						pieces = append(pieces, p.Text)
					}
				}
			}
			for _, sep := range []string{"", "\n"} {
				got := strings.Join(pieces, sep)
				for _, m := range ms {
					val := text[m.Start:m.End]
					require.LessOrEqual(t, strings.Count(got, val), strayOccurrences(text, val, ms),
						"iteration %d: %q survives in %q, cut into %q and %q (%s)", iter, val, got, a, b, msgs[0].Role)
				}
			}
		}
	}
}
