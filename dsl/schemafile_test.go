package dsl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A JSON Schema file that gives a key twice was read as encoding/json reads
// it, the last one winning: the first amount's maximum of 100 was dropped
// unseen and a refund of 5000 ran. The repeated key is refused, at its line
// and column in the file.
func TestSchemaFileRepeatedKeyIsRefused(t *testing.T) {
	for _, tt := range []struct{ policy, want string }{
		{"tools: refund: {side_effecting: true, args: \"refund.json\"}\n", "tools.refund.args"},
		{"tools: refund: {side_effecting: true, result_schema: \"refund.json\"}\n", "tools.refund.result_schema"},
		{"state: fields: f: schema: \"refund.json\"\n", "state.fields.f.schema"},
		{"chains: tool: [{use: \"output_coerce\", schema: \"refund.json\"}]\n", "chains.tool[0].schema"},
	} {
		dir := writePolicy(t, map[string]string{
			"p.cue": "package p\n\n" + tt.policy,
			"refund.json": `{
  "type": "object",
  "required": ["amount"],
  "properties": {
    "amount": {"type": "number", "maximum": 100},
    "note": {"type": "string"},
    "amount": {"type": "number"}
  }
}
`,
		})
		_, diags, err := Load(context.Background(), []string{dir}, Options{})
		require.NoError(t, err)
		require.Len(t, diags, 1, "%v", diags)
		d := diags[0]
		assert.Equal(t, "schema/invalid-value", d.Rule)
		assert.Equal(t, Error, d.Severity)
		assert.Equal(t, Pos{File: filepath.Join(dir, "refund.json"), Line: 7, Col: 5}, d.Pos)
		assert.Equal(t, tt.want+`: JSON Schema file "refund.json": key "amount" repeats a key of the same object (only the last would count)`, d.Message)
		require.Len(t, d.Related, 1)
		assert.Equal(t, filepath.Join(dir, "p.cue"), d.Related[0].Pos.File)
		assert.Equal(t, 3, d.Related[0].Pos.Line)
	}
}

// A fault inside a JSON Schema file (a type misspelt, a required name its
// properties lack, a keyword close to one that validates, a property name
// differing only in case) was placed at the file's name in the policy; it is
// placed at its line in the file, with the place the policy names the file.
func TestSchemaFileFaultsArePlacedInTheFile(t *testing.T) {
	placed := func(amountType string) []string {
		dir := writePolicy(t, map[string]string{
			"p.cue": "package p\n\ntools: refund: {side_effecting: true, args: \"refund.json\"}\n",
			"refund.json": `{
  "type": "object",
  "required": ["amount", "reason"],
  "properties": {
    "amount": {"type": "` + amountType + `"},
    "note": {"type": "string", "maxLenght": 64, "format": "date_time"},
    "Note": {"type": "string"}
  }
}
`,
		})
		_, diags, err := Load(context.Background(), []string{dir}, Options{})
		require.NoError(t, err)
		var got []string
		for _, d := range diags {
			require.Len(t, d.Related, 1, "%v", d)
			assert.Equal(t, Pos{File: filepath.Join(dir, "p.cue"), Line: 3, Col: 45}, d.Related[0].Pos)
			got = append(got, fmt.Sprintf("%s:%d:%d %s %s", filepath.Base(d.Pos.File), d.Pos.Line, d.Pos.Col, d.Severity, d.Rule))
		}
		return got
	}
	assert.ElementsMatch(t, []string{
		"refund.json:5:24 error schema/invalid-value", // numbr
		"refund.json:6:45 error schema/invalid-value", // maxLenght, in the same round
		"refund.json:6:59 warning schema/invalid-value",
		"refund.json:7:13 error schema/case-collision",
	}, placed("numbr"))
	// Once the type is fixed, the checks that follow a compiled schema.
	assert.ElementsMatch(t, []string{
		"refund.json:3:26 error schema/invalid-value",   // required reason
		"refund.json:6:45 error schema/invalid-value",   // maxLenght
		"refund.json:6:59 warning schema/invalid-value", // date_time
		"refund.json:7:13 error schema/case-collision",  // Note after note
	}, placed("number"))
}
