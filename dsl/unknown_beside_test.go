package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An unknown field of a chain entry is reported beside the entry's other
// errors, which hide it from the schema's own check: one round of vet
// shows every problem of the entry. A field the schema allows only under
// a setting (a classifier's model) is left to the schema's report.
func TestUnknownFieldBesideOtherErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"beside a wrong type", `tools: refund: {side_effecting: true}
chains: tool: [
	{use: "guard", tools: "refund", deny: "true", mesage: "x"},
]`, []string{"5:24 schema/invalid-value", "5:48 schema/unknown-field"}},
		{"beside a wrong enum", `tools: refund: {side_effecting: true}
chains: tool: [
	{use: "guard", tools: ["refund"], deny: "true", mesage: "x", on_error: "opne"},
]`, []string{"5:50 schema/unknown-field", "5:73 schema/invalid-value"}},
		{"alone", `tools: refund: {side_effecting: true}
chains: tool: [
	{use: "guard", deny: "true", mesage: "x"},
]`, []string{"5:31 schema/unknown-field"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, got := loadSnippet(t, tt.src)
			assert.Equal(t, tt.want, got, "%v", diags)
			for _, d := range diags {
				if d.Rule == "schema/unknown-field" {
					assert.Equal(t, `unknown field "mesage"; did you mean "message"?`, d.Message)
				}
			}
		})
	}
}
