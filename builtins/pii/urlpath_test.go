package pii_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// A card number in a URL path segment, between slashes after a word
// ("/u/4111-1111-1111-1111/a.png") or before a file's extension
// ("4111111111111111.png"), was left alone: a slash or a dot between a
// letter and a digit read as inside a token. It is a card; a slash or a
// dot next to a digit still is not a boundary (a date, an amount, a
// dotted or slashed run of numbers), nor a dash next to a letter (an id).
func TestCardInAURLPathSegment(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for text, want := range map[string]string{
		"https://img.example/u/4111-1111-1111-1111/a.png": "4111-1111-1111-1111",
		"https://img.example/u/4111111111111111/a.png":    "4111111111111111",
		"https://img.example/cards/4111111111111111.png":  "4111111111111111",
		"/files/4111 1111 1111 1111.pdf":                  "4111 1111 1111 1111",
		"card 4111111111111111.Thanks":                    "4111111111111111",
		"https://img.example/2024/4111111111111111/a.png": "",
		"amount 4111111111111111.25":                      "",
		"ORD-4111111111111111":                            "",
		"4111111111111111-abc":                            "",
		"v1.4111111111111111":                             "",
		"https://img.example/4111111111111111/2.png":      "",
	} {
		var got string
		for _, m := range s.Find(text) {
			got = text[m.Start:m.End]
		}
		assert.Equal(t, want, got, text)
	}
}
