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

// TestAKeyGivenTwiceIsRefused: text whose object gives a key twice (keys
// differing only in case counting as one) is not read as a value, while
// the JSON form of a Go value is read as the value.
func TestAKeyGivenTwiceIsRefused(t *testing.T) {
	const want = `the key "/a/B" is given twice (keys differing only in case count as one), and parsers differ on which one they read`
	_, err := Parse(`{"a": {"b": 1, "B": 2}}`)
	require.EqualError(t, err, "not valid JSON: "+want)
	for _, v := range []any{json.RawMessage(`{"a":{"b":1,"B":2}}`), []byte(`{"a":{"b":1,"B":2}}`)} {
		_, text, err := Data(v)
		require.EqualError(t, err, want)
		assert.Equal(t, `{"a":{"b":1,"B":2}}`, text)
	}
	data, _, err := Data(map[string]any{"b": 1, "B": 2})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"b": json.Number("1"), "B": json.Number("2")}, data)
}

// TestDataRefusesTrailingData: raw bytes holding a JSON value and more
// (`{"status":"ok"} {"status":"error"}`) were read as their first value, so
// output_coerce validated that value while the result the model reads holds
// both; Parse refuses such a text, and so does Data now.
func TestDataRefusesTrailingData(t *testing.T) {
	for _, raw := range []string{`{"status":"ok"} {"status":"error"}`, `{"status":"ok"} tail`, `1 2`, "[] ]"} {
		for _, v := range []any{json.RawMessage(raw), []byte(raw)} {
			_, text, err := Data(v)
			require.EqualError(t, err, "trailing data after the value", raw)
			assert.Equal(t, raw, text)
		}
		_, err := Parse(raw)
		require.Error(t, err)
	}
	data, _, err := Data(json.RawMessage(" {\"status\":\"ok\"}\n\t "))
	require.NoError(t, err, "white space around the value is no data")
	assert.Equal(t, map[string]any{"status": "ok"}, data)
}
