// Package jsonpointer splits and escapes RFC 6901 JSON Pointers, as JSON Schema
// validation errors report the places they concern.
package jsonpointer

import "strings"

// Tokens splits a JSON pointer ("/lines/0/sku") into its unescaped tokens
// (~1 is "/", ~0 is "~"); the empty pointer has none.
func Tokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// Escape escapes one token for a JSON pointer ("/" is ~1, "~" is ~0), the
// inverse of what Tokens does to each token.
func Escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}
