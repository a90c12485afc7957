package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A test file's paths are placed where they are written, in CUE as in
// JSON; a path built by a reference at its deepest written ancestor.
func TestIndexSource(t *testing.T) {
	cue := IndexSource("a_test.cue", []byte("package p\n\n_base: steps: []\ntests: \"refund case\": {\n\tscenario: _base\n\twant: steps: [{}, {outcome: \"okay\"}]\n}\n"))
	for _, tt := range []struct {
		path []string
		want Pos
	}{
		{[]string{"tests", "refund case"}, Pos{File: "a_test.cue", Line: 4, Col: 8}},
		{[]string{"tests", "refund case", "want", "steps", "1", "outcome"}, Pos{File: "a_test.cue", Line: 6, Col: 21}},
		{[]string{"tests", "refund case", "want", "steps", "1"}, Pos{File: "a_test.cue", Line: 6, Col: 20}},
		{[]string{"tests", "refund case", "scenario", "steps", "0"}, Pos{File: "a_test.cue", Line: 5, Col: 12}},
	} {
		got, ok := cue.Pos(tt.path...)
		assert.True(t, ok, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
	_, ok := cue.Pos("nope")
	assert.False(t, ok)

	js := IndexSource("case.json", []byte("{\"tests\": {\"a\": {\n  \"want\": {\"steps\": [{\"outcome\": \"okay\"}]}}}}"))
	got, ok := js.Pos("tests", "a", "want", "steps", "0", "outcome")
	assert.True(t, ok)
	assert.Equal(t, Pos{File: "case.json", Line: 2, Col: 23}, got)

	got, ok = js.At([]string{"tests", "a"}, "want.steps[0].outcome")
	assert.True(t, ok)
	assert.Equal(t, Pos{File: "case.json", Line: 2, Col: 23}, got)

	assert.Nil(t, IndexSource("bad.cue", []byte("tests: {")))
	_, ok = (*SourceIndex)(nil).Pos("tests")
	assert.False(t, ok)
}

// A model or a tool whose name holds a dot (gpt-4.1) has its fields placed
// where they are written, not at its name.
func TestDottedNamesPlaceTheirFields(t *testing.T) {
	p, _, _ := loadSnippet(t, `models: "gpt-4.1": {
	provider: "openai"
	model:    "gpt-4.1"
}`)
	require.NotNil(t, p)
	assert.Equal(t, 4, p.Models["gpt-4.1"].FieldPos["provider"].Line)
	_, _, got := loadSnippet(t, `tools: "fs.read": {
	args: {
		type: "object"
		properties: p: type: "strng"
	}
}`)
	assert.Equal(t, []string{"6:24 schema/invalid-value"}, got)
}
