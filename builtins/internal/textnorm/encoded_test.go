package textnorm

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEncodings: a run of base64 (either alphabet, padded or not, behind text of its alphabet,
// wrapped over lines) or hex is read as the text it decodes to, and names the encoding it was
// decoded from; binary decodings and ordinary words give nothing.
func TestEncodings(t *testing.T) {
	secret := "AKIAIOSFODNN7EXAMPLE"
	std := base64.StdEncoding.EncodeToString([]byte(secret + "?>"))
	url := base64.URLEncoding.EncodeToString([]byte(secret + "?>"))
	raw := base64.RawStdEncoding.EncodeToString([]byte(secret + "!"))
	long := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("the card is 4111 1111 1111 1111. ", 4)))
	wrapped := long[:64] + "\n" + long[64:128] + "\r\n" + long[128:]
	hx := hex.EncodeToString([]byte(secret))
	xhex := `\x` + strings.ReplaceAll(spaced(hx, " "), " ", `\x`)
	for _, tt := range []struct {
		name, text string
		want       []Encoded
	}{
		{"standard", "key: " + std + " end", []Encoded{{5, 5 + len(std), secret + "?>", "base64", 0, ""}}},
		{"url-safe", "k=" + url, []Encoded{{2, 2 + len(url), secret + "?>", "base64", 0, ""}}},
		{"unpadded", raw + ".", []Encoded{{0, len(raw), secret + "!", "base64", 0, ""}}},
		{"behind a path", "/v1/x/" + raw, []Encoded{{0, 6 + len(raw), secret + "!", "base64", 0, ""}}},
		{"wrapped", "data:\n" + wrapped + "\n. next line", []Encoded{{6, 6 + len(wrapped), strings.Repeat("the card is 4111 1111 1111 1111. ", 4), "base64", 0, ""}}},
		{"hex", "0x" + hx + " and " + strings.ToUpper(hx), []Encoded{{0, 2 + len(hx), secret, "hex", 0, ""}, {7 + len(hx), 7 + 2*len(hx), secret, "hex", 0, ""}}},
		{"hex spaced", "dump: " + spaced(hx, " ") + " end", []Encoded{{6, 6 + len(spaced(hx, " ")), secret, "hex", 0, ""}}},
		{"hex colons", spaced(strings.ToUpper(hx), ":"), []Encoded{{0, len(spaced(hx, ":")), secret, "hex", 0, ""}}},
		{`\x hex`, `s = "` + xhex + `"`, []Encoded{{5, 5 + len(xhex), secret, "hex", 0, ""}}},
		{"0x bytes", "{" + "0x" + strings.ReplaceAll(spaced(hx, " "), " ", ", 0x") + "}", []Encoded{{1, 1 + len("0x"+strings.ReplaceAll(spaced(hx, " "), " ", ", 0x")), secret, "hex", 0, ""}}},
		{"base32", "k: " + base32.StdEncoding.EncodeToString([]byte(secret+"!")) + ".", []Encoded{{3, 3 + len(base32.StdEncoding.EncodeToString([]byte(secret+"!"))), secret + "!", "base32", 0, ""}}},
		{"upper-case words", "PLEASE READ THE TERMS AND CONDITIONS CAREFULLY BEFORE SIGNING", nil},
		{"fingerprint", "SHA256 " + spaced(hex.EncodeToString(sha256.New().Sum(nil)), ":") + " MAC 00:1a:2b:3c:4d:5e", nil},
		{"words", "internationalization responsibilities Supercalifragilistic", nil},
		{"hash", "sha256:" + hex.EncodeToString(sha256.New().Sum(nil)) + " " + base64.StdEncoding.EncodeToString(sha256.New().Sum(nil)), nil},
		{"short", base64.StdEncoding.EncodeToString([]byte("a@b.c")), nil},
		{"shortest", "k " + base64.RawStdEncoding.EncodeToString([]byte("jo@ex.io")) + ".", []Encoded{{2, 13, "jo@ex.io", "base64", 0, ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Encodings(tt.text))
		})
	}
	// A word of the next line glued to a wrapped run as its last line does not hide the
	// run's value.
	enc := base64.StdEncoding.EncodeToString([]byte("SSN 078-05-1120")) // 20 characters
	got := Encodings("sure:\n" + enc + "\ndone")
	if assert.Len(t, got, 1) {
		assert.Contains(t, strings.Split(got[0].Text, "\n"), "SSN 078-05-1120")
		assert.Equal(t, len("sure:\n"+enc+"\ndone"), got[0].End)
	}

	r := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 1<<16)
	for i := range bin {
		bin[i] = byte(r.Uint32())
	}
	got = Encodings(base64.StdEncoding.EncodeToString(bin))
	assert.LessOrEqual(t, len(got), 1)
	for _, e := range got {
		for piece := range strings.SplitSeq(e.Text, "\n") {
			assert.Less(t, len(piece), 16, "random bytes hold short printable pieces only")
		}
	}
}

// spaced writes the hex run hx as its bytes separated by sep.
func spaced(hx, sep string) string {
	var parts []string
	for i := 0; i+2 <= len(hx); i += 2 {
		parts = append(parts, hx[i:i+2])
	}
	return strings.Join(parts, sep)
}

// TestWrappedRunStart: a text released line by line is held from the start of the base64 run
// that ends its last line when the next line may go on with it, as base64Run reads a wrapped
// run; the lines of a wrapped run are held from its first.
func TestWrappedRunStart(t *testing.T) {
	line := strings.Repeat("QUJD", 4) // 16 characters
	for _, tt := range []struct {
		text string
		want int
	}{
		{"here:\n" + line + "\n", 6},
		{"here: " + line + "\r\n", 6},
		{"x\n" + line + line + "\n" + line + "\n", 2},
		{"x\n" + line + "ab\n" + line + "\n", 2 + len(line) + 3},
		{"x\n" + line[:12] + "\n", -1},
		{"x\n" + line + "a\n", -1},
		{"x\n" + line + ".\n", -1},
		{"x\n" + line, -1},
		{"", -1},
		{"\n", -1},
		{line + "\n", 0},
	} {
		assert.Equal(t, tt.want, WrappedRunStart(tt.text), "%q", tt.text)
		if tt.want >= 0 {
			end, _, _ := base64Run(tt.text+line, tt.want)
			assert.Equal(t, len(tt.text)+len(line), end, "the run goes on over the line break: %q", tt.text)
		}
	}
}

func BenchmarkEncodingsProse(b *testing.B) {
	text := strings.Repeat("The order shipped on Monday; the customer asked about the delivery window and a refund. ", 24)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Encodings(text)
	}
}

func BenchmarkEncodingsImage(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 48<<10)
	for i := range bin {
		bin[i] = byte(r.Uint32())
	}
	text := base64.StdEncoding.EncodeToString(bin)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Encodings(text)
	}
}

// BenchmarkEncodingsIDs: identifiers of the URL-safe alphabet (UUIDs, order numbers) are
// decoded and found binary, without allocating.
func BenchmarkEncodingsIDs(b *testing.B) {
	text := strings.Repeat("order ORD-2024-118234, trace 7f3a9c1e-55b2-4f0e-9d0a-1c2b3c4d5e6f; ", 24)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if len(Encodings(text)) != 0 {
			b.Fatal("an identifier read as text")
		}
	}
}

// TestEncodingsCutInsideACharacter: the encoding of a text beyond ASCII read from, or up to,
// a place inside a character's bytes (a part of a longer run, cut at a line break) is read
// as the text it decodes to, the characters cut left out: a card written with no-break
// spaces among CJK text was read only as its runs of 8 ASCII bytes or more, and missed.
func TestEncodingsCutInsideACharacter(t *testing.T) {
	text := "漢字漢字 card 4111\u00a01111\u00a01111\u00a01111 漢字🙂"
	for from := 0; from < 3; from++ {
		for _, to := range []int{len(text), len(text) - 1, len(text) - 2, len(text) - 3, len(text) - 4} {
			enc := hex.EncodeToString([]byte(text[from:to]))
			got := Encodings("dump " + enc + " end")
			if assert.Len(t, got, 1, "from %d to %d", from, to) {
				assert.Contains(t, got[0].Text, "card 4111\u00a01111\u00a01111\u00a01111 漢字", "from %d to %d", from, to)
			}
			b64 := base64.StdEncoding.EncodeToString([]byte("x" + text[from:to]))
			got = Encodings("data:\n" + wrapIn(b64[4:], 64) + "done")
			if assert.Len(t, got, 1, "from %d to %d", from, to) {
				assert.Contains(t, got[0].Text, "card 4111\u00a01111\u00a01111\u00a01111", "base64 from %d to %d", from, to)
			}
		}
	}
	// More bytes than a character's cut end, or one that is no character, are binary.
	for _, dec := range []string{"\x80\x80\x80\x80漢字 4111\u00a01111\u00a01111\u00a01111", "漢字 4111\u00a01111\u00a01111\u00a01111\xe6\xbcAB",
		"\xff漢字 4111\u00a01111\u00a01111\u00a01111"} {
		for _, e := range Encodings("k " + hex.EncodeToString([]byte(dec)) + " end") {
			assert.NotContains(t, e.Text, "\u00a0", "%q", dec)
		}
	}
}

// wrapIn writes s in lines of n characters.
func wrapIn(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		b.WriteString(s[i:min(len(s), i+n)] + "\n")
	}
	return b.String()
}
