package pii_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
)

// heldModel streams its deltas and records, before each, how many bytes of the stream the
// layer has been handed and not yet let out (out: the bytes the caller got, for a stream the
// layer lets out as it is) and how many it has been handed since it last let something out
// (gap; the caller sets *at to sent at each delta it gets).
type heldModel struct {
	deltas       []string
	out, at      *int
	sent         int
	maxHeld, gap int
}

func (m *heldModel) Stream(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.sent, m.maxHeld, m.gap = 0, 0, 0
	for _, d := range m.deltas {
		m.maxHeld = max(m.maxHeld, m.sent-*m.out)
		m.gap = max(m.gap, m.sent-*m.at)
		m.sent += len(d)
		if !yield(runtime.Delta{Text: d}) {
			return nil
		}
	}
	return nil
}

// streamHeld streams deltas through a layer of config and returns what went out, the model,
// whose maxHeld and gap tell what the layer held, and the error.
func streamHeld(t *testing.T, config string, deltas []string) (string, *heldModel, error) {
	var got strings.Builder
	out, at := 0, 0
	model := &heldModel{deltas: deltas, out: &out, at: &at}
	_, err := chatPipeline(t, config, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary",
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
		func(d runtime.Delta) bool { got.WriteString(d.Text); out, at = got.Len(), model.sent; return true })
	return got.String(), model, err
}

// wrapLines writes s in lines of n characters.
func wrapLines(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		b.WriteString(s[i:min(len(s), i+n)])
		b.WriteByte('\n')
	}
	return b.String()
}

// byLines cuts text after each line break.
func byLines(text string) []string {
	var out []string
	for len(text) > 0 {
		k := strings.IndexByte(text, '\n') + 1
		if k == 0 {
			k = len(text)
		}
		out = append(out, text[:k])
		text = text[k:]
	}
	return out
}

// randomBytes returns n bytes of rng.
func randomBytes(rng *rand.Rand, n int) []byte {
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return raw
}

// chunks cuts text into deltas of 1 to 16 bytes.
func chunks(text string, rng *rand.Rand) []string {
	var out []string
	for i := 0; i < len(text); {
		k := min(len(text), i+1+rng.IntN(16))
		out = append(out, text[i:k])
		i = k
	}
	return out
}

// TestEncodedRunHoldIsBounded: a run of hex (64 characters a line) or of base64 (MIME's 76)
// that goes on over 2 MB of the model's output, or a hex dump of text (xxd's lines, 2 MB), streamed in deltas of 1 to 16 bytes, is not
// held whole until it ends: the layer never holds more than pii.MaxEncodedHold bytes and a
// line and a delta more, and what goes out is what Redact makes of the whole text (the run
// decodes to binary and holds nothing), with "redact" and with "block". The whole run was
// held, 2 MB, and a stream of such a payload grew the hold without bound.
func TestEncodedRunHoldIsBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	raw := randomBytes(rng, 1<<20)
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	const bound = 64<<10 + 80 + 16 // the bound, a line and a delta more
	for name, run := range map[string]string{
		"hex":    wrapLines(hex.EncodeToString(raw), 64),
		"base64": wrapLines(base64.StdEncoding.EncodeToString(append(raw, raw[:len(raw)/2]...)), 76),
		"xxd":    textnormtest.ProseDump(2<<20 + 4096),
	} {
		text := "the payload:\n" + run + "done\n"
		require.Greater(t, len(text), 2<<20-1, name)
		want, _ := s.Redact(text)
		require.Equal(t, text, want, "%s: the run holds nothing", name)
		for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
			got, model, err := streamHeld(t, config, chunks(text, rng))
			require.NoError(t, err, "%s %s", name, config)
			assert.True(t, want == got, "%s %s: the output is not what Redact makes of the whole text", name, config)
			assert.LessOrEqual(t, model.maxHeld, bound, "%s %s: held %d bytes", name, config, model.maxHeld)
		}
	}
}

// TestEncodedRunPastTheBoundMasked: a value encoded in a run of base64 that goes on past the
// bound of the hold is masked (or refused) all the same, wherever it stands in the run: the
// lines its encoding is written on never go out. Read whole, the run is one placeholder;
// streamed, its lines before the bound that hold nothing have gone out as they are.
func TestEncodedRunPastTheBoundMasked(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	words := []string{"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "away."}
	var pb strings.Builder
	for pb.Len() < 270_000 {
		pb.WriteString(words[rng.IntN(len(words))] + " ")
	}
	prose := pb.String()
	for _, at := range []int{1000, 100_000, 200_000} {
		plain := prose[:at] + " write to jane.doe@example.com now " + prose[at:]
		enc := base64.StdEncoding.EncodeToString([]byte(plain))
		run := wrapLines(enc, 76)
		text := "the payload:\n" + run + "done\n"
		// the lines the address is encoded on
		first, last := (at*4/3)/76, ((at+40)*4/3)/76+1
		lines := strings.Split(run, "\n")[first:last]
		for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
			got, model, err := streamHeld(t, config, chunks(text, rng))
			if config == `{"action":"block"}` {
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b, "at %d", at)
			} else {
				require.NoError(t, err)
				assert.Contains(t, got, "[REDACTED:email]", "at %d", at)
				assert.True(t, strings.HasSuffix(got, "done\n"))
			}
			for _, l := range lines {
				assert.False(t, strings.Contains(got, l), "at %d %s: a line of the address went out", at, config)
			}
			assert.LessOrEqual(t, model.gap, 64<<10+80+16, "at %d %s: %d bytes came with nothing let out", at, config, model.gap)
		}
	}
}

// TestEncodedRunPastTheBoundBeyondASCII: a card written with no-break spaces in a text of CJK
// characters, encoded in a run of base64 that goes on past the bound, is masked (or refused)
// wherever it stands in the run. The run was read at the bound up to a line break that falls
// inside a character's bytes, its decoding was then no text but for its runs of ASCII, and
// the card went out.
func TestEncodedRunPastTheBoundBeyondASCII(t *testing.T) {
	var pb strings.Builder
	for pb.Len() < 120_000 {
		pb.WriteString("漢字")
	}
	prose := "x" + pb.String()
	card := "card 4111\u00a01111\u00a01111\u00a01111 "
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, at := range []int{1000, 30_001, 100_003} { // between two characters
		plain := prose[:at] + card + prose[at:]
		enc := base64.StdEncoding.EncodeToString([]byte(plain))
		run := wrapLines(enc, 76)
		text := "the payload:\n" + run + "done\n"
		_, n := s.Redact(text)
		require.Equal(t, 1, n, "at %d: the whole text holds the card", at)
		first, last := (at*4/3)/76, ((at+len(card))*4/3)/76+1
		lines := strings.Split(run, "\n")[first:last]
		for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
			got, model, err := streamHeld(t, config, byLines(text))
			if config == `{"action":"block"}` {
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b, "at %d", at)
			} else {
				require.NoError(t, err)
				assert.True(t, strings.Contains(got, "[REDACTED:card]"), "at %d: the card is not masked", at)
				assert.True(t, strings.HasSuffix(got, "done\n"))
			}
			for _, l := range lines {
				assert.False(t, strings.Contains(got, l), "at %d %s: a line of the card went out", at, config)
			}
			assert.LessOrEqual(t, model.gap, 64<<10+80, "at %d %s", at, config)
		}
	}
}

// TestEncodedRunStraddlingTheBoundMasked: in a run of base64 read at the bound once it
// holds an address, an item whose encoding straddles the line break the run was read up to
// is masked (or refused) all the same: the run's lines after it are no run of their own,
// read apart, where the item's tail is none, but go out as nothing, the placeholder standing
// for the whole run as in the whole text. They went out as they were.
func TestEncodedRunStraddlingTheBoundMasked(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(4, 2))
	prose := strings.Repeat("the quick brown fox jumps over a lazy dog. ", 3000)
	cutAt := 57 * 852 // the plain text of the run's lines up to its first reading at the bound
	for _, item := range []string{"4111 1111 1111 1111", "GB29 NWBK 6016 1331 9268 19", "+44 20 7946 0958", "jane.doe@example.com"} {
		for off := 1; off < len(item); off += 3 {
			at := cutAt - off
			plain := prose[:1000] + " mail jane.doe@example.com " + prose[1027:at] + item + prose[at+len(item):]
			run := wrapLines(base64.StdEncoding.EncodeToString([]byte(plain)), 76)
			text := "the payload:\n" + run + "done\n"
			_, n := s.Redact(text)
			require.NotZero(t, n)
			lines := strings.Split(run, "\n")[at*4/3/76 : (at+len(item))*4/3/76+1]
			for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
				for _, deltas := range [][]string{byLines(text), chunks(text, rng)} {
					got, _, err := streamHeld(t, config, deltas)
					if config == `{"action":"block"}` {
						var b *runtime.BlockedError
						require.ErrorAs(t, err, &b, "%q off %d", item, off)
					} else {
						require.NoError(t, err)
						assert.True(t, strings.HasSuffix(got, "done\n"), "%q off %d", item, off)
					}
					for _, l := range lines {
						assert.False(t, strings.Contains(got, l), "%q off %d %s: a line of the item went out", item, off, config)
					}
				}
			}
		}
	}
}

// TestEncodedRunHoldIsBoundedAfterDigits: a run of hex after a line that ends in a digit
// ("Step 2", which the next line could go on from) is held no more than the bound, a line and
// a delta, with "redact" and with "block", and goes out as Redact makes of the whole text.
// The line was held with the run, so the run never started the text held and the bound was
// never read: the whole run was held, and read again at every line.
func TestEncodedRunHoldIsBoundedAfterDigits(t *testing.T) {
	raw := randomBytes(rand.New(rand.NewPCG(5, 8)), 1<<17)
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, pre := range []string{"Step 2\n", "call (415)\n", "ref 4111 1111\n"} {
		text := pre + wrapLines(hex.EncodeToString(raw), 64) + "done\n"
		want, _ := s.Redact(text)
		for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
			got, model, err := streamHeld(t, config, byLines(text))
			require.NoError(t, err, "%q %s", pre, config)
			assert.True(t, want == got, "%q %s: the output is not what Redact makes of the whole text", pre, config)
			assert.LessOrEqual(t, model.maxHeld, 64<<10+80+16, "%q %s: held %d bytes", pre, config, model.maxHeld)
		}
	}
}
