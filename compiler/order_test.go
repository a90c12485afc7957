package compiler

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/vet"
)

func TestOrderRulesListTheSuite(t *testing.T) {
	rules := map[string]Rule{}
	for _, r := range Rules() {
		rules[r.ID] = r
	}
	for _, r := range vet.Suite {
		got, ok := rules[r.Name]
		if assert.True(t, ok, "%s is not listed by Rules", r.Name) {
			assert.Equal(t, r.Title(), got.Title)
			assert.NotEmpty(t, got.Severity)
		}
	}
	assert.Equal(t, "declared", string(rules["order/<id>"].Severity))
	assert.Equal(t, "error", string(rules["order/audit-trail"].Severity))
}

func TestCheckOrderStage(t *testing.T) {
	dir := t.TempDir()
	src := `package p

tools: refund: {side_effecting: true, retry_safe: true}

chains: tool: [
	{use: "retry"},
	{use: "audit", trail: "logical"},
]
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	c, err := Compile(context.Background(), []string{dir}, Options{StopAfter: "check-order"})
	require.NoError(t, err)
	require.Len(t, c.Diagnostics, 1, "%v", c.Diagnostics)
	d := c.Diagnostics[0]
	assert.Equal(t, "order/audit-trail", d.Rule)
	assert.Equal(t, 7, d.Pos.Line)
	require.Len(t, d.Related, 1)
	assert.Equal(t, 6, d.Related[0].Pos.Line)
	assert.Contains(t, c.Stages, "check-order")
	assert.Nil(t, c.Plan)
}
