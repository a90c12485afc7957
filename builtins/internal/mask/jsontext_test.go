package mask

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestJSONRuns: the runs of consecutive strings of the arrays of a JSON text, and of the
// values of its objects, are read, decoded, with the keys of an object's values when one is of
// a card group's digits alone; keys, strings apart from the next by another value, and texts
// that are no JSON object or array give none.
func TestJSONRuns(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       []jsonRun
	}{
		{"array", ` ["a", "b\"c", "d\u0041"]`, []jsonRun{{[]string{"a", `b"c`, "dA"}, false}}},
		{"nested", `{"k": "v", "rows": [{"x": ["1", "2"]}, ["3", "4", 5, "6", "7"]]}`, []jsonRun{{[]string{"1", "2"}, false}, {[]string{"3", "4"}, false}, {[]string{"6", "7"}, false}}},
		{"values across a nested object", `{"a": "b", "c": {"d": "e"}, "f": "g"}`, nil},
		{"one string", `["a", 1, "b"]`, nil},
		{"object values", `{"a": "b", "c": "d", "e": 1, "f": "g", "h": ["i"], "j": "k", "l": "m"}`, []jsonRun{{[]string{"b", "d"}, true}, {[]string{"k", "m"}, true}}},
		{"one value", `{"a": "b"}`, nil},
		{"brackets in strings", `["[", "}"]`, []jsonRun{{[]string{"[", "}"}, false}}},
		{"unpaired", `["a", "b"}`, nil},
		{"unclosed", `["a", "b"`, nil},
		{"not json", `say ["a", "b"]`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runs, keys := jsonRuns(tt.text)
			assert.Equal(t, tt.want, runs)
			assert.Nil(t, keys, "no value of a card group's digits alone")
		})
	}
	runs, keys := jsonRuns(`{"a": "x", "c\u0063": "4111", "d": "y", "e": ["1111", "2222"], "f": "1", "g": "2"}`)
	assert.Equal(t, []jsonRun{{[]string{"x", "4111", "y"}, true}, {[]string{"1111", "2222"}, false}, {[]string{"1", "2"}, true}}, runs)
	assert.Equal(t, [][]string{{"", "cc", ""}, nil, nil}, keys, "the key of a value of a card group's digits alone, decoded")
}

// TestJSONMembers: each string value of an object is read with its key, and each string of an
// object under a key that holds a value, and the one string of an array, that is the value of a
// key with that key too (one level down, not two; not the strings of a list, nor those under
// other keys); keys are decoded.
func TestJSONMembers(t *testing.T) {
	_, _, got := readJSON(`{"a": "b", "c": {"d": "e", "value": "v", "f": ["g"]}, "h\u0041": ["i", 1, "j"], "k": [{"l": "m"}]}`, true)
	assert.Equal(t, []jsonMember{{"a", "b"}, {"d", "e"}, {"value", "v"}, {"c", "v"}, {"f", "g"}, {"l", "m"}}, got)
	runs, _, members := readJSON(`{"a": "b"`, true)
	assert.Nil(t, runs)
	assert.Nil(t, members)
}
