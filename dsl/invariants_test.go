package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInvariants(t *testing.T) {
	const tools = `tools: refund: side_effecting: true` + "\n"
	tests := []struct {
		name  string
		src   string
		wants []string // "line:col rule"
	}{
		{"clean", tools + `invariants: {off: ["audit_complete"], max_executions: refund: 2, custom: one: "executions.tools.refund <= 1"}`, nil},
		{"unknown builtin", tools + `invariants: off: ["audit"]`, []string{"4:19 schema/invalid-value"}},
		{"undeclared tool", tools + `invariants: max_executions: refnud: 2`, []string{"4:37 schema/bad-reference"}},
		{"bound out of range", tools + `invariants: max_executions: refund: 0`, []string{"4:37 schema/invalid-value"}},
		{"unknown field", tools + `invariants: always: ["x"]`, []string{"4:13 schema/unknown-field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags, got := loadSnippet(t, tt.src)
			assert.Equal(t, tt.wants, got, "%v", diags)
			if tt.wants == nil {
				require.NotNil(t, p.Invariants)
				assert.Equal(t, []string{"audit_complete"}, p.Invariants.Off)
				assert.Equal(t, map[string]int{"refund": 2}, p.Invariants.MaxExecutions)
				require.Contains(t, p.Invariants.Custom, "one")
				assert.Equal(t, "executions.tools.refund <= 1", p.Invariants.Custom["one"].Source)
				assert.Equal(t, 4, p.Invariants.Custom["one"].Pos.Line)
			}
		})
	}
}
