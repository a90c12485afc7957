package jsonvalue_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
)

// upper upper-cases a string and counts it when it changed.
func upper(s string) (string, int) {
	u := strings.ToUpper(s)
	if u == s {
		return s, 0
	}
	return u, 1
}

func TestMapStrings(t *testing.T) {
	tests := []struct {
		name  string
		in    any
		want  any
		wantN int
	}{
		{name: "string", in: "a", want: "A", wantN: 1},
		{name: "unchanged string", in: "A", want: "A"},
		{name: "number", in: 4.0, want: 4.0},
		{name: "bool", in: true, want: true},
		{name: "nil", in: nil, want: nil},
		{name: "map keys mapped too",
			in:   map[string]any{"K": "v", "N": 1.0, "nested": []any{"x", map[string]any{"Y": "z"}}},
			want: map[string]any{"K": "V", "N": 1.0, "NESTED": []any{"X", map[string]any{"Y": "Z"}}}, wantN: 4},
		{name: "string map", in: map[string]string{"A": "b", "C": "D"}, want: map[string]string{"A": "B", "C": "D"}, wantN: 1},
		{name: "string slice", in: []string{"a", "b"}, want: []string{"A", "B"}, wantN: 2},
		{name: "other container untouched", in: map[string]int{"a": 1}, want: map[string]int{"a": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := jsonvalue.MapStrings(tt.in, upper)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantN, n)
		})
	}
}

func TestMapStringsCopiesContainers(t *testing.T) {
	in := map[string]any{"LIST": []any{"A"}, "M": map[string]string{"K": "V"}, "S": []string{"X"}}
	out, n := jsonvalue.MapStrings(in, upper)
	assert.Zero(t, n)
	m := out.(map[string]any)
	m["LIST"].([]any)[0] = "changed"
	m["M"].(map[string]string)["K"] = "changed"
	m["S"].([]string)[0] = "changed"
	m["new"] = "x"
	assert.Equal(t, map[string]any{"LIST": []any{"A"}, "M": map[string]string{"K": "V"}, "S": []string{"X"}}, in,
		"containers are copied even when nothing changed")
}

func TestMapLeaves(t *testing.T) {
	double := func(v any) (any, int) {
		if f, ok := v.(float64); ok {
			return f * 2, 1
		}
		return v, 0
	}
	got, n := jsonvalue.MapLeaves(map[string]any{"A": 1.0, "B": []any{2.0, "c", false}}, upper, double)
	assert.Equal(t, map[string]any{"A": 2.0, "B": []any{4.0, "C", false}}, got)
	assert.Equal(t, 3, n)

	got, n = jsonvalue.MapLeaves(3.0, upper, double)
	assert.Equal(t, 6.0, got, "other sees a top-level leaf too")
	assert.Equal(t, 1, n)
}

// mask replaces a string holding "secret" by "[M]".
func mask(s string) (string, int) {
	if strings.Contains(s, "secret") {
		return "[M]", 1
	}
	return s, 0
}

func TestMapStringsRenamesKeys(t *testing.T) {
	in := map[string]any{
		"secret-1": "a",
		"secret-2": map[string]any{"secret-3": "secret-4"},
		"[M]":      "kept",
		"plain":    "b",
	}
	got, n := jsonvalue.MapStrings(in, mask)
	assert.Equal(t, map[string]any{
		"[M]":   "kept",
		"[M]#2": "a",
		"[M]#3": map[string]any{"[M]": "[M]"},
		"plain": "b",
	}, got, "a masked key is renamed; a name taken gets the first free suffix, in key order")
	assert.Equal(t, 4, n)
	assert.Contains(t, in, "secret-1", "the input is not modified")

	gotS, n := jsonvalue.MapStrings(map[string]string{"secret-a": "x", "secret-b": "y"}, mask)
	assert.Equal(t, map[string]string{"[M]": "x", "[M]#2": "y"}, gotS)
	assert.Equal(t, 2, n)
}

// digits masks every run of digits of a text as "#".
func digits(s string) (string, int) {
	out, n := strings.Builder{}, 0
	in := false
	for _, c := range s {
		if c >= '0' && c <= '9' {
			if !in {
				out.WriteByte('#')
				n++
			}
			in = true
			continue
		}
		in = false
		out.WriteRune(c)
	}
	return out.String(), n
}

func TestMapText(t *testing.T) {
	in := map[string]any{"a": 1234.0, "b": 1.5, "c": json.Number("42"), "d": []any{int64(7), true, nil}, "e": "x9", "f": 1e20}
	got, n := jsonvalue.MapText(in, digits)
	assert.Equal(t, map[string]any{"a": "#", "b": 1.5, "c": "#", "d": []any{"#", true, nil}, "e": "x#", "f": "#"}, got,
		"an integral number is read as its digits, whatever its size")
	assert.Equal(t, 5, n)
	assert.Equal(t, 1234.0, in["a"], "v itself is untouched")

	got, n = jsonvalue.MapText(map[string]any{"N": 12.0}, upper)
	assert.Equal(t, map[string]any{"N": 12.0}, got, "a number f leaves as it is stays a number")
	assert.Zero(t, n)
}

func TestNumberText(t *testing.T) {
	for v, want := range map[any]string{4111111111111111.0: "4111111111111111", -3.0: "-3", 7: "7",
		int64(8): "8", uint64(9): "9", json.Number("12345678901234567891"): "12345678901234567891",
		json.Number("-12"): "-12", json.Number("1e3"): "1000", json.Number("4111.0"): "4111",
		1e19: "10000000000000000000", 12345678901234567000.0: "12345678901234567000",
		json.Number("1.2345678901234567e19"): "12345678901234567000"} {
		got, ok := jsonvalue.NumberText(v)
		assert.True(t, ok, "%v", v)
		assert.Equal(t, want, got)
	}
	for _, v := range []any{1.5, math.Inf(1), math.NaN(), json.Number("1.5"), json.Number("-"), "12", true, nil, float32(1)} {
		_, ok := jsonvalue.NumberText(v)
		assert.False(t, ok, "%v", v)
	}
}

// TestDecodeOrdered: a JSON text's objects keep their members in the order written, a key
// written twice included; the values are read in that order, keys renamed in it, and the
// text written back so, without HTML escapes.
func TestDecodeOrdered(t *testing.T) {
	v, err := jsonvalue.DecodeOrdered(` {"z": "a", "m": "b", "a": [1.5, {"k": "<b>"}], "z": null, "A": "c"}`)
	require.NoError(t, err)
	var order []string
	out, n := jsonvalue.MapTextJoined(v, upper, func(run, keys []string) ([]string, int) {
		order = append(order, strings.Join(run, "+"))
		return run, 0
	}, nil)
	assert.Equal(t, []string{"a+b"}, order, "the values read together as written: z, then m")
	assert.Equal(t, 7, n)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(out))
	assert.Equal(t, `{"Z":"a","M":"b","A#2":[1.5,{"K":"<B>"}],"Z#2":null,"A":"C"}`+"\n", b.String())

	for _, bad := range []string{`{"a": 1} x`, `{"a" 1}`, `[1,`, ``} {
		_, err := jsonvalue.DecodeOrdered(bad)
		assert.Error(t, err, bad)
	}
}
