package jsonkind

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOfNamesEveryDecodedKindInOneWording(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"}, {"x", "a string"}, {true, "a boolean"}, {json.Number("3"), "a number"},
		{3.5, "a number"}, {7, "a number"}, {[]any{1}, "an array"}, {[]string{"a"}, "an array"},
		{map[string]any{}, "an object"}, {make(chan int), "a Go chan int"},
	} {
		assert.Equal(t, c.want, Of(c.v), "%#v", c.v)
	}
}

// A kind a schema names reads as the value it holds does: a field that
// is an int is refused "a string" as one that needs "an integer".
func TestNamedAgreesWithOf(t *testing.T) {
	for kind, v := range map[string]any{"string": "s", "bool": false, "float": 1.5, "number": 2.0,
		"list": []any{}, "struct": map[string]any{}, "map": map[string]any{}} {
		w, ok := Named(kind)
		assert.True(t, ok, kind)
		assert.Equal(t, Of(v), w, kind)
	}
	w, ok := Named("int")
	assert.True(t, ok)
	assert.Equal(t, "an integer", w)
	_, ok = Named("any")
	assert.False(t, ok)
}
