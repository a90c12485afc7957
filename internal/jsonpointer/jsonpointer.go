// Package jsonpointer splits RFC 6901 JSON Pointers, as JSON Schema
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
