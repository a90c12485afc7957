package compiler

import (
	"context"
	"fmt"
	"strings"
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

// TestUncomparedLayerOfARemovedChain: a layer of the baseline only whose
// state keys cannot be read, its whole chain removed, is reported in the
// policy (where its chain was, else where chains is written), saying what
// was removed, never at no position.
func TestUncomparedLayerOfARemovedChain(t *testing.T) {
	const deployed = `package p
tools: refund: {side_effecting: true, args: {type: "object", properties: {order_id: type: "string"}}}
stores: shared: {kind: "redis", url_env: "REDIS_URL"}
chains: tool: [{use: "idempotent", store: "shared", key_args: ["order_id"]}]
`
	ctx := context.Background()
	old, err := LoadBaseline(ctx, writePolicy(t, deployed), Options{})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		src  string
		line int
		says string
	}{
		"chain gone": {`package p
tools: refund: {side_effecting: true, args: {type: "object", properties: {order_id: type: "string"}}}

chains: chat: [{use: "log"}]
`, 4, "the policy has no tool chain"},
		"chain emptied": {`package p
tools: refund: {side_effecting: true, args: {type: "object", properties: {order_id: type: "string"}}}
chains: chat: [{use: "log"}]
chains: tool: []
`, 4, "the policy has no tool chain"},
		"layer gone": {`package p
tools: refund: {side_effecting: true, args: {type: "object", properties: {order_id: type: "string"}}}
chains: chat: [{use: "log"}]
chains: tool: [
	{use: "log"},
]
`, 5, "removed from the tool chain"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Compile(ctx, []string{writePolicy(t, tc.src)}, Options{})
			require.NoError(t, err)
			require.NotNil(t, c.Plan, "%v", c.Diagnostics)
			c.CompareBaseline(old)
			var got []dsl.Diagnostic
			for _, d := range c.Diagnostics {
				if d.Rule == RuleStateReset && strings.Contains(d.Message, "idempotent in the baseline") {
					got = append(got, d)
				}
			}
			require.Len(t, got, 1)
			assert.True(t, got[0].Pos.IsValid(), "a position in the policy: %v", got[0].Pos)
			assert.Equal(t, tc.line, got[0].Pos.Line)
			assert.Contains(t, got[0].Message, "idempotent in the baseline could not be compared")
			assert.Contains(t, got[0].Message, tc.says)
		})
	}
}
