package resultjson

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/jsonwalk"
)

// agree fails t unless Parse and Data read text as they read it in two
// passes (parseTwoPasses, dataTwoPasses: how they read every text before
// decodeOnce): the same value, or the same error.
func agree(t *testing.T, text []byte) {
	t.Helper()
	got, gerr := Parse(string(text))
	want, werr := parseTwoPasses(string(text))
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || !equal(got, want) {
		t.Fatalf("Parse(%q) = %#v, %v; in two passes %#v, %v", text, got, gerr, want, werr)
	}
	got, gtext, gerr := Data(json.RawMessage(text))
	want, wtext, werr := dataTwoPasses(text)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || gtext != wtext || !equal(got, want) {
		t.Fatalf("Data(%q) = %#v, %q, %v; in two passes %#v, %q, %v", text, got, gtext, gerr, want, wtext, werr)
	}
}

// equal is value equality that tells a nil list from an empty one.
func equal(a, b any) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

// seeds are texts each fault and reading of a text begins with.
var seeds = []string{
	`{"a": [1, {"b/c": "x", "d~e": null}], "f": {}, "": [[true]]}`,
	`{"a": 1, "A": 2, "a": 3}`, `[1, 2`, `{"a" 1}`, `1 2`, `"\u00e9\ud800"`, `[[[[[[]]]]]]`, ` -0.5e+3 `,
	`{"x": tru}`, `{"k": "v",}`, "\xff", ``, ` `, `{"a":{"b":1,"B":2}}`, `{"task":1,"ta\u017fk":2}`,
	`{"kind":1,"\u212aind":2}`, `{"i":1,"ı":2}`, `{"a":1,"a":2} tail`, `{"a":1} tail`, `{"a":1}{"a":1,"a":2}`,
	`{"a":1,"a"`, `{"a":1,"a":`, `{"a":1,"a":2,`, `"\ud83d\ude00 \ude00\ud83d \ud800\u0041 \ud800\\u"`,
	"\"a\x01\"", "\"\xed\xa0\x80 \xc3\xa9 \xe2\x82\"", `"\x"`, `"\u12g4"`, `"\/\b\f\n\r\t\"\\"`,
	`01`, `1.`, `-`, `1e`, `1e+`, `-0`, `0.0e0`, `1E-7`, `--1`, `+1`, `.5`, `truefalse`, `nul`, "\ufeff{}",
	`[1,]`, `[,1]`, `{,}`, `{"a":1,,"b":2}`, `{"a" : 1 , "b" : [ 1 , 2 ] }`, "\t\r\n[\n]\n",
	`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1}}`,
	`{"content":[],"structuredContent":null}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3000),
}

// repoJSON are the repository's JSON files: plans, scenarios, schemas,
// recorded streams.
func repoJSON(t testing.TB) [][]byte {
	var out [][]byte
	for _, glob := range []string{"../../*/testdata/*.json", "../../*/*/testdata/*.json", "../../schemas/*.json"} {
		files, err := filepath.Glob(glob)
		require.NoError(t, err)
		for _, name := range files {
			if data, err := os.ReadFile(name); err == nil && len(data) < 64<<10 {
				out = append(out, data)
			}
		}
	}
	return out
}

// TestOnePassAgreesWithTwo: Parse and Data read the seeds, the
// repository's JSON files, texts made of random tokens and every prefix
// of some of them as the two passes did.
func TestOnePassAgreesWithTwo(t *testing.T) {
	for _, s := range seeds {
		agree(t, []byte(s))
	}
	files := repoJSON(t)
	require.NotEmpty(t, files)
	for _, f := range files {
		agree(t, f)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	valid, repeated := 0, 0
	for n := range 20000 {
		text := randomText(rng, 0, rng.IntN(4) == 0)
		if rng.IntN(8) == 0 {
			text = text[:rng.IntN(len(text)+1)]
		}
		agree(t, []byte(text))
		if _, ok := decodeOnce([]byte(text)); ok {
			valid++
		} else if _, ok := jsonwalk.RepeatedKey([]byte(text)); ok {
			repeated++
		}
		if n < 200 {
			for i := range len(text) {
				agree(t, []byte(text[:i]))
			}
		}
	}
	t.Logf("%d valid, %d with a key given twice", valid, repeated)
	// The texts try both ways and the error.
	assert.Greater(t, valid, 2000)
	assert.Greater(t, repeated, 2000)
	assert.Greater(t, 20000-valid-repeated, 2000)
}

// randomText is a text of random JSON tokens with keys that repeat in
// some case, escapes and bytes that are not UTF-8; with faults, also with
// tokens out of place or malformed.
func randomText(rng *rand.Rand, depth int, faults bool) string {
	ws := func() string { return []string{"", "", " ", "\n\t", "\r "}[rng.IntN(5)] }
	// pick picks one of s, among the first n unless faults.
	pick := func(n int, s ...string) string {
		if !faults {
			s = s[:n]
		}
		return s[rng.IntN(len(s))]
	}
	k := rng.IntN(12)
	if depth == 0 {
		k = rng.IntN(5)
	}
	switch {
	case depth < 4 && k < 3:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range rng.IntN(6) {
			if i > 0 {
				b.WriteString(ws() + pick(1, ",", ",", ",", ",", ",", ",", ",", ",", ",,", "") + ws())
			}
			b.WriteString(pick(16, `"a"`, `"A"`, `"b"`, `"ta\u017fk"`, `"task"`, `"\u212aind"`, `"kind"`, `"ı"`, `"i"`, `"\u0061"`, `"é"`, `"É"`, `"x/y"`, `"X~Y"`, `""`, "\"\xff\"", `1`))
			b.WriteString(ws() + pick(1, ":", ":", ":", ":", ":", "") + ws())
			b.WriteString(randomText(rng, depth+1, faults))
		}
		b.WriteString(ws() + pick(1, "}", "}", "}", "}", "}", "]", ",}", ""))
		return b.String()
	case depth < 4 && k < 5:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(ws() + pick(1, ",", ",", ",", ",", ",", "") + ws())
			}
			b.WriteString(randomText(rng, depth+1, faults))
		}
		b.WriteString(ws() + pick(1, "]", "]", "]", "]", "]", "}", ",]", ""))
		return b.String()
	case k < 7:
		return pick(8, `0`, `-0`, `12`, `1.5`, `-3.25e+10`, `1E-2`, `9007199254740993`, `1e400`, `007`, `1.`, `-`, `1e`, `.5`, `+1`)
	case k < 10:
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(6) {
			b.WriteString(pick(22, `x`, `Hello, world`, `\"`, `\\`, `\/`, `\n`, `\t`, `\b\f\r`, `\u0041`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\ud800\ud800`,
				"é", "😀", "\xff", "\xed\xa0\x80", "\xe2\x82", "\x7f", "\u2028", `\u12`, `\x`, `\`, "\x01", "\t"))
		}
		b.WriteString(pick(1, `"`, `"`, `"`, `"`, `"`, ""))
		return b.String()
	default:
		return pick(3, `true`, `false`, `null`, `tru`, `nul`, `True`, `falsey`)
	}
}

// FuzzParse: the one pass reads every text as the two passes did.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, data := range repoJSON(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data)
	})
}

func TestFoldKeyAsJSONWalk(t *testing.T) {
	for _, k := range []string{"", "abc", "ABC", "a-b_c/1~", "taſk", "\u212aind", "ı", "é", "MiXeD", "\xff", "z{|}~"} {
		assert.Equal(t, jsonwalk.FoldKey(k), foldKey(k), k)
	}
	for c := range 128 {
		k := string(rune(c))
		assert.Equal(t, jsonwalk.FoldKey(k), foldKey(k), "%q", k)
	}
	// A small object's keys are told apart by strings.EqualFold.
	keys := []string{"task", "TASK", "ta\u017fk", "kind", "\u212aind", "i", "ı", "I", "é", "É", "s", "ſ", "\ufffd", "a/b", "A/B"}
	for _, a := range keys {
		for _, b := range keys {
			assert.Equal(t, jsonwalk.FoldKey(a) == jsonwalk.FoldKey(b), strings.EqualFold(a, b), "%q, %q", a, b)
		}
	}
}

// A large object's keys are kept in a map: a key given twice far apart is
// still noticed.
func TestManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"K3":0}`)
	_, err := Parse(b.String())
	require.EqualError(t, err, `not valid JSON: the key "/K3" is given twice (keys differing only in case count as one), and parsers differ on which one they read`)
	agree(t, []byte(b.String()))
}

// toolResult is the JSON text of a tool's result of about 14 KB: an MCP
// result whose text holds records as JSON, and their structured content.
func toolResult() []byte {
	type record struct {
		ID     int      `json:"id"`
		Name   string   `json:"name"`
		Email  string   `json:"email"`
		Tags   []string `json:"tags"`
		Score  float64  `json:"score"`
		Active bool     `json:"active"`
		Note   *string  `json:"note"`
	}
	note := "Réunion à 10 h, \"urgent\""
	var recs []record
	for i := range 40 {
		r := record{ID: i, Name: fmt.Sprintf("Customer %d", i), Email: fmt.Sprintf("c%d@example.com", i), Tags: []string{"gold", "eu"}, Score: float64(i) / 3, Active: i%2 == 0}
		if i%3 == 0 {
			r.Note = &note
		}
		recs = append(recs, r)
	}
	text, _ := json.Marshal(recs)
	out, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": string(text)}},
		"structuredContent": map[string]any{"records": recs},
		"isError":           false,
	})
	return out
}

func BenchmarkParse(b *testing.B) {
	text := string(toolResult())
	b.Logf("%d bytes", len(text))
	want, err := parseTwoPasses(text)
	require.NoError(b, err)
	got, err := Parse(text)
	require.NoError(b, err)
	require.Equal(b, want, got)
	b.Run("two passes", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = parseTwoPasses(text)
		}
	})
	b.Run("one pass", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = Parse(text)
		}
	})
	// For scale: encoding/json's decoding alone, which notices no key
	// given twice.
	b.Run("encoding/json alone", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			var v any
			dec := json.NewDecoder(strings.NewReader(text))
			dec.UseNumber()
			_ = dec.Decode(&v)
		}
	})
}

func BenchmarkData(b *testing.B) {
	raw := json.RawMessage(toolResult())
	b.Run("two passes", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = dataTwoPasses(raw)
		}
	})
	b.Run("one pass", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = Data(raw)
		}
	})
}
