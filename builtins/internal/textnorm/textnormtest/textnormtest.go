// Package textnormtest holds the spellings the detectors' tests write values in.
package textnormtest

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Encodings write a value as a tool or a model may hand it over: plain, and encoded in base64
// (either alphabet, with and without padding, behind a path, twice), hex (bare, upper case
// after "0x", and its bytes separated by spaces or colons or each after "\x") and base32
// (RFC 4648, padded), the encodings textnorm.Encodings reads; and its characters escaped
// twice, as JSON, percent-encoding or HTML references (textnorm.UnescapeNested); and as the
// lines of a hex dump (Dump).
func Encodings() map[string]func(string) string {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	return map[string]func(string) string{
		"plain":            func(s string) string { return s },
		"base64":           b64,
		"base64 url raw":   func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
		"base64 in path":   func(s string) string { return "/v1/blobs/" + base64.RawURLEncoding.EncodeToString([]byte("to: "+s)) },
		"base64 of base64": func(s string) string { return b64(b64(s)) },
		"hex":              func(s string) string { return hex.EncodeToString([]byte(s)) },
		"0x hex":           func(s string) string { return "0x" + strings.ToUpper(hex.EncodeToString([]byte(s))) },
		"hex spaced":       func(s string) string { return hexBytes(s, "", " ") },
		"hex colons":       func(s string) string { return hexBytes(s, "", ":") },
		`\x hex`:           func(s string) string { return hexBytes(s, `\x`, "") },
		"base32":           func(s string) string { return base32.StdEncoding.EncodeToString([]byte(s)) },
		// a hex dump over lines: xxd's, and hexdump -C's
		"xxd":        func(s string) string { return "\n" + Dump(s, 2, ": ", true) },
		"hexdump -C": func(s string) string { return "\n" + Dump(s, 1, "  ", true) },
		// escapes escaped again: a JSON string quoted in a JSON string, a URL encoded twice,
		// an HTML reference escaped
		"json escaped twice":    func(s string) string { return escapeEach(s, `\\u%04x`) },
		"percent-encoded twice": func(s string) string { return escapeEach(s, "%%25%02X") },
		"html escaped twice":    func(s string) string { return escapeEach(s, "&amp;#%d;") },
	}
}

// escapeEach writes each byte of s (ASCII) with format.
func escapeEach(s, format string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// hexBytes writes s as its bytes in hex, each after prefix, separated by sep.
func hexBytes(s, prefix, sep string) string {
	parts := make([]string, len(s))
	for i := range len(s) {
		parts[i] = prefix + hex.EncodeToString([]byte{s[i]})
	}
	return strings.Join(parts, sep)
}

// Dump writes s as a hex dump writes a file, 16 bytes a line: the offset, sep, the bytes in
// groups of group bytes (hexdump -C: 1, with a wider gap in the middle of the line; xxd: 2)
// and, with chars, the bytes as characters (a dot for those that are not printable; between
// bars with groups of 1); each
// line ends in a line break.
func Dump(s string, group int, sep string, chars bool) string {
	var b strings.Builder
	for off := 0; off < len(s); off += 16 {
		line := s[off:min(off+16, len(s))]
		fmt.Fprintf(&b, "%08x%s", off, sep)
		hx := ""
		for i := 0; i < len(line); i += group {
			if i > 0 {
				hx += " "
				if group == 1 && i == 8 {
					hx += " "
				}
			}
			hx += hex.EncodeToString([]byte(line[i:min(i+group, len(line))]))
		}
		b.WriteString(hx)
		if chars {
			width := 16*2 + 16/group - 1
			if group == 1 {
				width++
			}
			b.WriteString(strings.Repeat(" ", width-len(hx)+2))
			if group == 1 {
				b.WriteByte('|')
			}
			for i := range len(line) {
				if c := line[i]; c >= 0x20 && c < 0x7f {
					b.WriteByte(c)
				} else {
					b.WriteByte('.')
				}
			}
			if group == 1 {
				b.WriteByte('|')
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ProseDump returns an xxd dump (Dump: bytes in groups of 2, with the characters) of prose,
// size bytes of dump or a little less, a whole number of lines.
func ProseDump(size int) string {
	n := size / 68 * 16 // a line of 68 bytes dumps 16
	prose := strings.Repeat("the quick brown fox jumps over the lazy dog. ", n/45+1)
	return Dump(prose[:n], 2, ": ", true)
}

// Tags writes s in tag characters (U+E0020 to U+E007E), which show nothing and which a model
// reads as the ASCII characters they stand for. Other characters are kept as they are.
func Tags(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 0x20 && r <= 0x7E {
			r += 0xE0000
		}
		b.WriteRune(r)
	}
	return b.String()
}

// AroundEncoded returns a text of random words with secret encoded in base64 (either
// alphabet, padded or not) among them: the words before it and their separator (before), the
// encoding (value), and a separator and the words after it (after). The words after are
// several, or one whose length no encoding ends in: a lone word of a multiple of four letters
// on its own line under the encoding, decoding as text, may be the encoding's end.
func AroundEncoded(r *rand.Rand, secret string) (before, value, after string) {
	secret = strings.Join(randomWords(r, r.IntN(4)), " ") + " " + secret + " " + strings.Join(randomWords(r, r.IntN(4)), " ")
	encodings := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	value = encodings[r.IntN(len(encodings))].EncodeToString([]byte(secret))
	before = strings.Join(randomWords(r, 1+r.IntN(4)), " ") + []string{" ", "\n", "\t", ": "}[r.IntN(4)]
	sep := []string{"\n", "\r\n", " ", "\n\n", ".\n", "\n  ", ", "}[r.IntN(7)]
	words := randomWords(r, 1+r.IntN(5))
	for len(words) == 1 && len(words[0])%4 == 0 {
		words = randomWords(r, 1)
	}
	return before, value, sep + strings.Join(words, " ") + []string{"", "\n", "."}[r.IntN(3)]
}

// randomWords returns n words of 1 to 12 letters of either case.
func randomWords(r *rand.Rand, n int) []string {
	words := make([]string, n)
	for i := range words {
		b := make([]byte, 1+r.IntN(12))
		for k := range b {
			b[k] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[r.IntN(52)]
		}
		words[i] = string(b)
	}
	return words
}

// WordsAroundSurvive redacts n texts of AroundEncoded, each holding the secret secret
// returns, and reports whether each came out with the encoding masked and the words before and
// after it unchanged and in order (the first that did not fails t).
func WordsAroundSurvive(t *testing.T, r *rand.Rand, n int, secret func() string, redact func(string) (string, int)) bool {
	for range n {
		before, value, after := AroundEncoded(r, secret())
		text := before + value + after
		got, masked := redact(text)
		if !assert.NotZero(t, masked, "%q", text) || !assert.NotContains(t, got, value, "%q", text) ||
			!assert.True(t, strings.HasPrefix(got, before) && strings.HasSuffix(got, after), "%q\n-> %q", text, got) {
			return false
		}
	}
	return true
}
