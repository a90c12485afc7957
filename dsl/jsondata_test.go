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
// helper, which is no data, is not.
func TestLoadDataOptionalField(t *testing.T) {
	dir := t.TempDir()
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
		{"a hidden helper", "_base: {audit?: []}\n_#b: {audit?: []}\ntests: x: want: _base & {steps: []}\n", ""},
		{"a let", "let s = {a?: 1}\ntests: x: want: s & {steps: []}\n", ""},
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
