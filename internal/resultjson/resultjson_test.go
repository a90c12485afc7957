package resultjson

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValue(t *testing.T) {
	object, err := Compile(json.RawMessage(`{"type":"object"}`))
	require.NoError(t, err)
	either, err := Compile(json.RawMessage(`{"type":["object","string"]}`))
	require.NoError(t, err)
	decoded := map[string]any{"n": json.Number("1")}
	type point struct{ X int }
	for _, tc := range []struct {
		name string
		s    bool // with the schema of type object
		v    any
		want any
	}{
		{"no schema", false, `{"n":1}`, `{"n":1}`},
		{"JSON text", true, `{"n":1}`, decoded},
		{"JSON text of a string", true, `"x"`, `"x"`},
		{"text", true, "not JSON", "not JSON"},
		{"trailing data", true, `{"n":1} tail`, `{"n":1} tail`},
		{"raw JSON", true, json.RawMessage(`{"n":1}`), decoded},
		{"bytes of JSON text", true, []byte(`"{\"n\":1}"`), decoded},
		{"bytes that are not JSON", true, []byte("raw"), []byte("raw")},
		{"structured content", true, map[string]any{"content": []any{}, "structuredContent": decoded}, decoded},
		{"a map", true, map[string]any{"n": 1}, map[string]any{"n": 1}},
		{"a Go value", true, point{X: 1}, point{X: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.s {
				assert.Equal(t, tc.want, Value(nil, tc.v))
				return
			}
			assert.Equal(t, tc.want, Value(object, tc.v))
		})
	}
	assert.Equal(t, `{"n":1}`, Value(either, `{"n":1}`), "a schema that accepts the string reads it as a string")
}
