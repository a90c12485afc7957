package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGroundingSection(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		wants []string // "line:col rule"
	}{
		{"clean", `stores: logs: kind: "memory"
grounding: {
	render: {template: "{{range .Items}}{{.Content}}{{end}}", max_tokens: 50, placement: "before_last_user"}
	record_grounding: true
	sink: "logs"
	reground_every_turn: true
}`, nil},
		{"field typo, placed on the field", `grounding: render: template: "ok {{range .Items}}{{.Contnet}}{{end}}"`, []string{"3:52 schema/invalid-value"}},
		{"field typo in a multi-line string", "grounding: render: template: \"\"\"\n\tSources:\n\t{{range .Items}}[{{.Sourc}}]{{end}}\n\t\"\"\"", []string{"5:21 schema/invalid-value"}},
		{"parse error", `grounding: render: template: "{{range .Items}}"`, []string{"3:31 schema/invalid-value"}},
		{"parse error placed at its action", `grounding: render: template: "{{range .Items}}<doc>{{.Content}}</doc>{{end}"`, []string{"3:70 schema/invalid-value"}},
		{"parse error in a multi-line string", "grounding: render: template: \"\"\"\n\t{{range .Items}}\n\t<doc>{{.Content}</doc>\n\t{{end}}\n\t\"\"\"", []string{"5:7 schema/invalid-value"}},
		{"unknown placement", `grounding: render: {template: "x", placement: "top"}`, []string{"3:47 schema/invalid-value"}},
		{"budget out of bounds", `grounding: render: {template: "x", max_tokens: 0}`, []string{"3:48 schema/invalid-value"}},
		{"undeclared sink", `grounding: sink: "logs"`, []string{"3:18 schema/bad-reference"}},
		{"unknown field", `grounding: every_turn: true`, []string{"3:12 schema/unknown-field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags, got := loadSnippet(t, tt.src)
			assert.Equal(t, tt.wants, got, "%v", diags)
			if tt.wants == nil {
				require.NotNil(t, p)
				g := p.Grounding
				require.NotNil(t, g)
				assert.Equal(t, "{{range .Items}}{{.Content}}{{end}}", g.Template.Source)
				assert.Equal(t, 50, g.MaxTokens)
				assert.Equal(t, "before_last_user", g.Placement)
				assert.True(t, g.Record)
				assert.Equal(t, "logs", g.Sink)
				assert.True(t, g.EveryTurn)
			}
		})
	}
}
