// Package textnormtest holds the spellings the detectors' tests write values in.
package textnormtest

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Encodings write a value as a tool or a model may hand it over: plain, and encoded in base64
// (either alphabet, with and without padding, behind a path, twice), hex (bare, upper case
// after "0x", and its bytes separated by spaces or colons or each after "\x") and base32
// (RFC 4648, padded), the encodings textnorm.Encodings reads; and its characters escaped
// twice, as JSON, percent-encoding or HTML references (textnorm.UnescapeNested).
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
