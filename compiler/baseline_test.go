package compiler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/dsl"
)

// TestCompareBaselineWithoutTheMiddlewares: a program that compiles
// policies without the builtins registered with the runtime (this test's:
// it imports no builtins/all) cannot read the state keys of a layer, and
// says so at the layer, rather than reporting no change.
func TestCompareBaselineWithoutTheMiddlewares(t *testing.T) {
	const policy = `package p
tools: refund: {side_effecting: true, args: {type: "object", properties: {order_id: type: "string", amount: type: "number"}}}
stores: shared: {kind: "redis", url_env: "REDIS_URL"}
chains: tool: [{use: "idempotent", store: "shared", key_args: %s}]
`
	ctx := context.Background()
	old, err := LoadBaseline(ctx, writePolicy(t, fmt.Sprintf(policy, `["order_id"]`)), Options{})
	require.NoError(t, err)
	c, err := Compile(ctx, []string{writePolicy(t, fmt.Sprintf(policy, `["order_id", "amount"]`))}, Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan)
	c.CompareBaseline(old)
	var got []dsl.Diagnostic
	for _, d := range c.Diagnostics {
		if d.Rule == RuleStateReset {
			got = append(got, d)
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, dsl.Warning, got[0].Severity)
	assert.Equal(t, 4, got[0].Pos.Line, "at the layer")
	assert.Contains(t, got[0].Message, `idempotent could not be compared: middleware "idempotent" is not registered in this program`)
}
