package mask

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestJSONRuns: the runs of consecutive strings of the arrays of a JSON text, and of the
// values of its objects, are read, decoded; keys, strings apart from the next by another
// value, and texts that are no JSON object or array give none.
func TestJSONRuns(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       [][]string
	}{
		{"array", ` ["a", "b\"c", "d\u0041"]`, [][]string{{"a", `b"c`, "dA"}}},
		{"nested", `{"k": "v", "rows": [{"x": ["1", "2"]}, ["3", "4", 5, "6", "7"]]}`, [][]string{{"1", "2"}, {"3", "4"}, {"6", "7"}}},
		{"values across a nested object", `{"a": "b", "c": {"d": "e"}, "f": "g"}`, nil},
		{"one string", `["a", 1, "b"]`, nil},
		{"object values", `{"a": "b", "c": "d", "e": 1, "f": "g", "h": ["i"], "j": "k", "l": "m"}`, [][]string{{"b", "d"}, {"k", "m"}}},
		{"one value", `{"a": "b"}`, nil},
		{"brackets in strings", `["[", "}"]`, [][]string{{"[", "}"}}},
		{"unpaired", `["a", "b"}`, nil},
		{"unclosed", `["a", "b"`, nil},
		{"not json", `say ["a", "b"]`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, jsonRuns(tt.text))
		})
	}
}
