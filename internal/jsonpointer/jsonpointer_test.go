package jsonpointer

import (
	"slices"
	"testing"
)

func TestTokens(t *testing.T) {
	for ptr, want := range map[string][]string{
		"": nil, "/": {""}, "/lines/0/sku": {"lines", "0", "sku"}, "/a~1b/c~0d": {"a/b", "c~d"}, "/~01": {"~1"},
	} {
		if got := Tokens(ptr); !slices.Equal(got, want) {
			t.Errorf("Tokens(%q) = %q, want %q", ptr, got, want)
		}
	}
}
