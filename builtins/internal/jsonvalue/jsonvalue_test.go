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
		{name: "map keys kept",
			in:   map[string]any{"k": "v", "n": 1.0, "nested": []any{"x", map[string]any{"y": "z"}}},
			want: map[string]any{"k": "V", "n": 1.0, "nested": []any{"X", map[string]any{"y": "Z"}}}, wantN: 3},
		{name: "string map", in: map[string]string{"a": "b", "c": "D"}, want: map[string]string{"a": "B", "c": "D"}, wantN: 1},
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
	in := map[string]any{"list": []any{"A"}, "m": map[string]string{"k": "V"}, "s": []string{"X"}}
	out, n := jsonvalue.MapStrings(in, upper)
	assert.Zero(t, n)
	m := out.(map[string]any)
	m["list"].([]any)[0] = "changed"
	m["m"].(map[string]string)["k"] = "changed"
	m["s"].([]string)[0] = "changed"
	m["new"] = "x"
	assert.Equal(t, map[string]any{"list": []any{"A"}, "m": map[string]string{"k": "V"}, "s": []string{"X"}}, in,
		"containers are copied even when nothing changed")
}

func TestMapLeaves(t *testing.T) {
	double := func(v any) (any, int) {
		if f, ok := v.(float64); ok {
			return f * 2, 1
		}
		return v, 0
	}
	got, n := jsonvalue.MapLeaves(map[string]any{"a": 1.0, "b": []any{2.0, "c", false}}, upper, double)
	assert.Equal(t, map[string]any{"a": 2.0, "b": []any{4.0, "C", false}}, got)
	assert.Equal(t, 3, n)

	got, n = jsonvalue.MapLeaves(3.0, upper, double)
	assert.Equal(t, 6.0, got, "other sees a top-level leaf too")
	assert.Equal(t, 1, n)
}
