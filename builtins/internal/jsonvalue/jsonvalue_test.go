package jsonvalue_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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
