package compiler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

func TestInvariantsLowered(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: side_effecting: true
invariants: {
	off: ["budget_overshoot"]
	max_executions: refund: 2
	custom: one_refund: "executions.tools.refund <= 1"
}
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan, "%v", c.Diagnostics)
	assert.Equal(t, &plan.Invariants{
		Off:           []string{"budget_overshoot"},
		MaxExecutions: map[string]int{"refund": 2},
		Custom:        map[string]plan.Invariant{"one_refund": {Expr: "executions.tools.refund <= 1", Pos: "p.cue:7:22"}},
	}, c.Plan.Invariants)
}

func TestInvariantsCELChecked(t *testing.T) {
	dir := writePolicy(t, `package p

invariants: custom: {
	syntax: "executions.tools.refund <= "
	typo:   "crashd || true"
	number: "size(steps) + 1"
	fine:   "size(audit) <= 2 && !crashed"
}
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		got = append(got, d.Pos.String()[len(d.Pos.File)+1:]+" "+d.Rule)
	}
	assert.Equal(t, []string{"4:38 cel/syntax", "5:11 cel/type", "6:11 cel/type"}, got, "%v", c.Diagnostics)
	assert.Nil(t, c.Plan)
}
