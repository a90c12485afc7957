// Package textnormtest holds the spellings the detectors' tests write values in.
package textnormtest

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Encodings write a value as a tool or a model may hand it over: plain, and encoded in base64
// (either alphabet, with and without padding, behind a path, twice) and hex (bare, and upper
// case after "0x"), the encodings textnorm.Encodings reads.
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
	}
}
