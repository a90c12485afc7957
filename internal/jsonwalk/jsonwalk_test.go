package jsonwalk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\n\nef")
	for off, want := range map[int64][2]int{
		-5: {1, 1}, 0: {1, 1}, 2: {1, 3}, 3: {2, 1}, 5: {2, 3}, 6: {3, 1}, 7: {4, 1}, 9: {4, 3}, 100: {4, 3},
	} {
		line, col := Position(data, off)
		assert.Equal(t, want, [2]int{line, col}, "offset %d", off)
	}
}

func TestValueStart(t *testing.T) {
	data := []byte(`{"a" :  1 ,` + "\n\t\r" + `"b"}`)
	assert.Equal(t, int64(0), ValueStart(data, 0))
	assert.Equal(t, int64(8), ValueStart(data, 4), "past the space, the colon and the spaces")
	assert.Equal(t, int64(14), ValueStart(data, 9), "past the comma and the line break")
	assert.Equal(t, int64(len(data)), ValueStart(data, int64(len(data))))
	assert.Equal(t, int64(3), ValueStart([]byte("1  "), 1), "the end of data")
}

// Every value is visited with its JSON pointer (keys escaped) and the
// offset of its first byte, in the order of the text.
func TestWalkValues(t *testing.T) {
	data := []byte(`{"a": [1, {"b/c": "x", "d~e": null}], "f": {}, "": [[true]]}`)
	var got []string
	w := Walker{Value: func(ptr []byte, start int64) bool {
		got = append(got, fmt.Sprintf("%s@%d:%c", ptr, start, data[start]))
		return true
	}}
	require.NoError(t, w.Walk(data))
	assert.Equal(t, []string{
		"@0:{", "/a@6:[", "/a/0@7:1", "/a/1@10:{", "/a/1/b~1c@18:\"", "/a/1/d~0e@30:n",
		"/f@43:{", "/@51:[", "//0@52:[", "//0/0@53:t",
	}, got)
}

// A visit that returns false ends the walk without an error, even
// before a fault of the text.
func TestWalkStops(t *testing.T) {
	data := []byte(`{"a": 1, "b": 2, "c": 3} trailing`)
	var n int
	w := Walker{Value: func([]byte, int64) bool { n++; return n < 3 }}
	require.NoError(t, w.Walk(data))
	assert.Equal(t, 3, n)

	var reps int
	w = Walker{Repeat: func([]byte, string, int64, int64) bool { reps++; return false }}
	require.NoError(t, w.Walk([]byte(`{"a": 1, "a": 2, "a": 3} [`)))
	assert.Equal(t, 1, reps)
}

// A repeated key is reported with its object, its offset and the first
// one's; keys of other objects, and of a list's objects, are apart. Under
// Fold, keys that differ only in case repeat; elsewhere they do not.
func TestWalkRepeats(t *testing.T) {
	data := []byte(`{"k": 1, "o": {"k": 1, "K": 2, "k": 3}, "l": [{"k": 1}, {"k": 2}], "f": {"x": 1, "X": 2, "x/": 3, "x/": 4}, "k": 5}`)
	var got []string
	w := Walker{
		Fold: func(ptr []byte) bool { return string(ptr) == "/f" },
		Repeat: func(obj []byte, key string, start, first int64) bool {
			got = append(got, fmt.Sprintf("%s %q %d %d", obj, key, start, first))
			return true
		},
	}
	require.NoError(t, w.Walk(data))
	i := func(s string, n int) int {
		at := -1
		for range n {
			at += 1 + strings.Index(string(data[at+1:]), s)
		}
		return at
	}
	assert.Equal(t, []string{
		fmt.Sprintf(`/o "k" %d %d`, i(`"k"`, 3), i(`"k"`, 2)),
		fmt.Sprintf(`/f "X" %d %d`, i(`"X"`, 1), i(`"x"`, 1)),
		fmt.Sprintf(`/f "x/" %d %d`, i(`"x/"`, 2), i(`"x/"`, 1)),
		fmt.Sprintf(` "k" %d %d`, i(`"k"`, 6), i(`"k"`, 1)),
	}, got)
}

// A text that is not one JSON value is an *Error with the fault's offset:
// of a syntax error, the offending byte's, wherever the decoder's tokens
// count it from.
func TestWalkFaults(t *testing.T) {
	tests := []struct {
		name, src string
		want      error // nil: a *json.SyntaxError
		off       int64
	}{
		{"syntax", `{"a": [}`, nil, 7},
		{"a key that is not a string", `{1: 2}`, nil, 1},
		{"in a literal", `{"a": tru}`, nil, 9},
		{"in a string", "{\"a\": \"x\x01\"}", nil, 8},
		{"after the value", "{}\n x", nil, 4},
		{"truncated", "{\"a\": [1,\n", io.ErrUnexpectedEOF, 10},
		{"empty", "", io.ErrUnexpectedEOF, 0},
		{"trailing", "{\"a\": 1}\n {}", ErrTrailing, 10},
		{"trailing scalar", `1 2`, ErrTrailing, 2},
		{"too deep", `{"a": ` + strings.Repeat("[", 5) + strings.Repeat("]", 5) + "}", ErrTooDeep, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Walker{MaxDepth: 4}).Walk([]byte(tc.src))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.off, e.Offset)
			if tc.want == nil {
				var se *json.SyntaxError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, se.Error(), err.Error())
			} else {
				assert.ErrorIs(t, err, tc.want)
			}
		})
	}
}

// MaxDepth levels are allowed, one more is not; 0 sets no limit.
func TestWalkDepth(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"a":[`, n) + strings.Repeat("]}", n))
	}
	require.NoError(t, (&Walker{MaxDepth: 10}).Walk(nest(5)))
	err := (&Walker{MaxDepth: 9}).Walk(nest(5))
	require.ErrorIs(t, err, ErrTooDeep)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, int64(29), e.Offset, "the tenth container, the fifth '['")
	assert.Equal(t, byte('['), nest(5)[29])
	require.NoError(t, (&Walker{}).Walk(nest(300)))
	require.NoError(t, (&Walker{}).Walk([]byte(" \"s\"\n")), "a scalar with space around")
}

// A text nesting deeper than encoding/json decodes is refused as it
// refuses it, though the decoder's tokens count no depth.
func TestWalkRefusesWhatEncodingJSONRefuses(t *testing.T) {
	deep := []byte(strings.Repeat("[", jsonMaxDepth+1) + strings.Repeat("]", jsonMaxDepth+1))
	require.False(t, json.Valid(deep))
	var se *json.SyntaxError
	err := (&Walker{}).Walk(deep)
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Error(), "exceeded max depth")
	var we *Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, int64(jsonMaxDepth), we.Offset, "at the bracket past the limit")

	limit := []byte(strings.Repeat("[", jsonMaxDepth) + strings.Repeat("]", jsonMaxDepth))
	require.True(t, json.Valid(limit))
	assert.NoError(t, (&Walker{}).Walk(limit))
}

// Under Fold, keys repeat as encoding/json matches them to a struct's
// field: "ſ" (U+017F) is an s and "K" (U+212A) a k there too.
func TestWalkFoldsAsEncodingJSON(t *testing.T) {
	data := []byte(`{"task": 1, "ta\u017fk": 2, "kind": 3, "\u212aind": 4, "i": 5, "ı": 6}`)
	var st struct{ Task, Kind, I int }
	require.NoError(t, json.Unmarshal(data, &st))
	assert.Equal(t, 2, st.Task, "encoding/json reads ſ as s")
	assert.Equal(t, 4, st.Kind, "encoding/json reads K as k")
	assert.Equal(t, 5, st.I, "encoding/json does not read ı as i")
	var got []string
	w := Walker{Fold: func([]byte) bool { return true }, Repeat: func(_ []byte, key string, _, _ int64) bool {
		got = append(got, key)
		return true
	}}
	require.NoError(t, w.Walk(data))
	assert.Equal(t, []string{"ta\u017fk", "\u212aind"}, got)
}

func TestRepeatedKey(t *testing.T) {
	for args, want := range map[string]string{
		`{"amount":500,"amount":5}`:         `"/amount"`,
		`{"a":{"b":1,"B":2}}`:               `"/a/B"`,
		`{"a":[{"x":1},{"x/y":1,"X/Y":2}]}`: `"/a/1/X~1Y"`,
		`{"task":1,"ta\u017fk":2}`:          `"/taſk"`,
		`{"a":1,"b":{"a":2}}`:               ``,
		`[{"x":1},{"x":2}]`:                 ``,
		`{"a":`:                             ``,
	} {
		key, ok := RepeatedKey([]byte(args))
		assert.Equal(t, want, key, args)
		assert.Equal(t, want != "", ok, args)
	}
}
