package dsl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A JSON scenario or test file gets the bounds of a policy file and is
// refused, at its place, when encoding/json would read it differently
// from how it reads: a repeated key (the last would silently win), trailing
// data, an empty file.
func TestLoadDataJSON(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, src, want string }{
		{"ok", `{"a": {"b": [1, {"c": 2}]}, "d": []}`, ""},
		{"empty", " \n", "x.json: the file is empty: it must hold a JSON object"},
		{"syntax", "{\"a\": [}", "x.json:1:8: not JSON: invalid character '}' looking for beginning of value"},
		{"truncated", "{\"a\": [1,\n", "x.json:2:1: not JSON: the file ends before the value does (truncated?)"},
		// encoding/json's token reader counts the offset of a fault inside
		// a literal, a number or a string from the value's start, and of
		// one after the value from its end: the place is the byte's own.
		{"syntax in a literal", "{\"a\": 1,\n \"b\": tru}", "x.json:2:10: not JSON: invalid character '}' in literal true (expecting 'e')"},
		{"syntax in a number", "{\n\"a\": -}", "x.json:2:7: not JSON: invalid character '}' in numeric literal"},
		{"syntax after the value", "{}\n x", "x.json:2:2: not JSON: invalid character 'x' after top-level value"},
		{"trailing", "{\"a\": 1}\n{}", "x.json:2:1: more data after the JSON value: a file holds one value"},
		{"repeated key", "{\"tests\": {\"x\": {\"want\": 1,\n \"want\": 2}}}", `x.json:2:2: key "want" repeats a key of the same object (only the last would count)`},
		{"same key in two objects", `{"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}]}`, ""},
		{"deep", `{"a": ` + strings.Repeat("[", 250) + strings.Repeat("]", 250) + "}", "x.json:1:206: nesting deeper than 200 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if data := loadDataAs(t, filepath.Join(dir, "x.json"), tc.src, tc.want); tc.want == "" {
				assert.Equal(t, tc.src, string(data))
			}
		})
	}
}

// loadDataAs writes src at path and loads it: it returns the data when
// want is "", else asserts that the error, the file's directory left
// out, is want.
func loadDataAs(t *testing.T, path, src, want string) []byte {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	data, err := LoadData(context.Background(), path, DataOptions{})
	if want == "" {
		require.NoError(t, err)
		return data
	}
	require.Error(t, err)
	assert.Equal(t, want, strings.ReplaceAll(err.Error(), filepath.Dir(path)+string(filepath.Separator), ""))
	return nil
}

// A CUE scenario or test file is data: an optional field in it (result?:
// 2) was left out of the JSON unsaid, so the expectation or the argument
// it wrote was never checked nor used. It is refused at its place, as a
// required field (!) is; an optional field of a definition or a hidden
// helper, which is no data, is not, unless it holds data and reaches the
// data. One that holds a schema (a type, a default, an open struct or
// list) is not refused.
func TestLoadDataOptionalField(t *testing.T) {
	dir := t.TempDir()
	const msg = "an optional field is neither checked nor used (it is left out of the data): remove the ?"
	tests := []struct{ name, src, want string }{
		{"in want", "tests: x: {\n\twant: steps: [{outcome: \"ok\", result?: 2}]\n}\n",
			"x.cue:2:32: result?: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"a case field", "tests: x: {\n\twant_prove?: [\"audit_complete\"]\n}\n",
			"x.cue:2:2: want_prove?: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"in a scenario's args", "steps: [{tool: {name: \"t\", args: {amount?: 5000}}}]\n",
			"x.cue:1:35: amount?: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"quoted, in a pattern", "tests: [string]: want: \"audit\"?: []\ntests: x: {}\n",
			"x.cue:1:24: \"audit\"?: an optional field is neither checked nor used (it is left out of the data): remove the ? (a schema for the cases goes in a definition: #Case: {...}, tests: [string]: #Case)"},
		{"after a pattern", "tests: [string]: {a?: 1}\nb?: 2\n",
			"x.cue:1:19: a?: an optional field is neither checked nor used (it is left out of the data): remove the ? (a schema for the cases goes in a definition: #Case: {...}, tests: [string]: #Case)\n" +
				"x.cue:2:1: b?: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"a schema for the cases", "#Case: want_prove?: [...string]\ntests: [string]: #Case\ntests: x: {}\n", ""},
		{"each one", "a?: 1\nb: c?: 2\n",
			"x.cue:1:1: a?: an optional field is neither checked nor used (it is left out of the data): remove the ?\n" +
				"x.cue:2:4: c?: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"a computed label", "k: \"a\"\n(k)?: 1\n",
			"x.cue:2:1: an optional field is neither checked nor used (it is left out of the data): remove the ?"},
		{"a definition", "#Step: {outcome?: string, result?: _}\ntests: x: want: steps: [#Step & {outcome: \"ok\"}]\n", ""},
		{"a hidden helper left unused", "_#b: {audit?: []}\n_c: d?: 1\nlet e = {f?: 2}\n_g: e\ntests: x: want: steps: []\n", ""},

		// An optional field that reaches the data through a reference (a
		// hidden helper, a let, a definition) was left out of the JSON as
		// one written in place was, and so was a pattern constraint naming
		// one field (["audit"]: []), which applies to no field: each is
		// refused at its place, with where it is used, once.
		{"a hidden helper", "_base: {audit?: []}\ntests: x: want: _base & {steps: []}\n",
			"x.cue:1:9: audit?: " + msg + " (used at tests.x.want, x.cue:2:11)"},
		{"a let, in a list", "let s = {result?: 2}\ntests: x: want: steps: [s & {outcome: \"ok\"}]\n",
			"x.cue:1:10: result?: " + msg + " (used at tests.x.want.steps[0], x.cue:2:25)"},
		{"a definition used as data", "#W: {audit?: []}\ntests: x: want: #W\n",
			"x.cue:1:6: audit?: " + msg + " (used at tests.x.want, x.cue:2:11)"},
		{"a definition used twice, told once", "#W: {audit?: []}\ntests: x: want: #W\ntests: y: want: #W\n",
			"x.cue:1:6: audit?: " + msg + " (used at tests.x.want, x.cue:2:11)"},
		{"a struct of data", "#Case: want?: {steps: [], audit?: []}\ntests: [string]: #Case\ntests: x: {}\n",
			"x.cue:1:8: want?: " + msg + " (used at tests.x, x.cue:3:8)"},
		{"in an open schema the case fills", "#Case: want?: {steps: [...], audit?: [\"a\"]}\ntests: [string]: #Case\ntests: x: want: steps: []\n",
			"x.cue:1:30: audit?: " + msg + " (used at tests.x.want, x.cue:3:11)"},
		{"deep in a helper, placed at its use", "_s: {x: [{a?: {b: 1}}]}\ntests: x: want: _s\n",
			"x.cue:1:11: a?: " + msg + " (used at tests.x.want.x[0], x.cue:2:11)"},
		{"at the top level", "_b: {a?: 1}\n_b\ntests: {}\n",
			"x.cue:1:6: a?: " + msg + " (used at the top level, x.cue:2:1)"},
		{"a quoted name", "_b: {\"the audit\"?: null}\ntests: x: want: _b\n",
			"x.cue:1:6: \"the audit\"?: " + msg + " (used at tests.x.want, x.cue:2:11)"},
		{"a pattern naming one field", "tests: x: want: {[\"audit\"]: []}\n",
			"x.cue:1:18: [\"audit\"]: a pattern constraint naming one field is neither checked nor used (it is left out of the data): remove the [ ] (used at tests.x.want, x.cue:1:11)"},
		{"a pattern naming one field, by a definition", "#W: {[\"audit\"]: [1]}\ntests: x: want: #W\n",
			"x.cue:1:6: [\"audit\"]: a pattern constraint naming one field is neither checked nor used (it is left out of the data): remove the [ ] (used at tests.x.want, x.cue:2:11)"},

		// Schemas: what the field holds is no data.
		{"a schema for the cases, of each kind", "#Case: {want?: {...}, scenario!: {...}, want_vet?: [...string], prove_k?: int, n?: string, d?: *5 | int, e?: string | *\"a\", o?: \"ok\" | \"blocked\", m?: {x: *1 | int}, r?: >0, no?: _|_, p?: {[string]: int}}\ntests: [string]: #Case\ntests: x: scenario: {}\n", ""},
		{"a recursive schema", "#T: {next?: #T, v?: 1, w?: #T}\ntests: x: want: steps: []\n_t: #T\n", ""},
		{"a pattern matching a written field", "tests: x: want: {[\"audit\"]: [], audit: []}\n", ""},
		{"a pattern naming no one field", "tests: x: want: {[=~\"^a\"]: [], [\"a\" | \"b\"]: []}\n", ""},
		{"a pattern over the cases", "tests: [string]: want: steps: []\ntests: x: {}\n", ""},
		{"a default written as data", "#Case: {prove_k: *5 | int}\ntests: [string]: #Case\ntests: x: {}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loadDataAs(t, filepath.Join(dir, "x.cue"), tc.src, tc.want)
		})
	}
}

// A value left incomplete is refused at its place, whether or not CUE's
// error carries one (a disjunction, top, did not).
func TestLoadDataIncompleteIsPlaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.cue")
	for v, at := range map[string]string{`"ok" | "blocked"`: ":2:26", "_": ":2:26", "string": ":2:26", `{"0": _}`: ":2:32", `{"a b": "x" | "y"}`: ":2:34"} {
		src := "tests: x: {\n\twant: steps: [{outcome: " + v + "}]\n}\n"
		require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
		_, err := LoadData(context.Background(), path, DataOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tests.x.want.steps.0.outcome")
		assert.Contains(t, err.Error(), ": incomplete value")
		assert.True(t, strings.HasSuffix(err.Error(), path+at), "%s: %s", v, err)
	}
}

// A JSON data file, or a JSON Schema file a policy names, saved with a
// UTF-8 byte order mark (as Windows editors save) reads as without it.
func TestAByteOrderMarkIsNoPartOfTheData(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	require.NoError(t, os.WriteFile(path, []byte("\uFEFF{\"a\": 1}"), 0o644))
	data, err := LoadData(context.Background(), path, DataOptions{})
	require.NoError(t, err)
	assert.Equal(t, `{"a": 1}`, string(data))
	b, err := ReadFile(path, MaxFileSize)
	require.NoError(t, err)
	assert.Equal(t, `{"a": 1}`, string(b))
}
