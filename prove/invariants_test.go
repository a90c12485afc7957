package prove_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
)

// explorePolicy writes src as a policy and explores it at depth k.
func explorePolicy(t *testing.T, src string, k int) *prove.Report {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package p\n\n"+src), 0o644))
	comp, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{NoOrderCheck: true})
	require.NoError(t, err)
	require.NotNil(t, comp.Plan, "%v", comp.Diagnostics)
	r, err := prove.Explore(context.Background(), comp.Plan, prove.Options{Depth: k, Dir: dir})
	require.NoError(t, err)
	require.Positive(t, r.Targets)
	return r
}

func violated(r *prove.Report) []string {
	var out []string
	for _, v := range r.Violations {
		var b strings.Builder
		_ = v.WriteText(&b)
		out = append(out, b.String())
	}
	return out
}

const refundTool = `tools: refund: {side_effecting: true, args: {type: "object", required: ["order_id"], properties: order_id: type: "string"}}
`

// An idempotent layer in front of a tool that is not retry_safe is the fix
// vet proposes for a retry around it. A caller that sends the call again
// after it failed with a 503 makes a new logical call, as it does without
// the layer: the policy proves clean, as the same policy without
// idempotent does.
func TestMaxExecutionsIdempotentCallerResend(t *testing.T) {
	r := explorePolicy(t, refundTool+`chains: tool: [{use: "audit"}, {use: "idempotent"}]`, 3)
	assert.Empty(t, violated(r))
	r = explorePolicy(t, refundTool+`chains: tool: [{use: "audit"}]`, 3)
	assert.Empty(t, violated(r))
}

// Idempotent inside a retry still repeats the effect within one call.
func TestMaxExecutionsIdempotentInsideRetry(t *testing.T) {
	r := explorePolicy(t, refundTool+`chains: tool: [{use: "retry", max_attempts: 3, initial_delay: "10ms"}, {use: "idempotent"}]`, 2)
	require.NotEmpty(t, r.Violations)
	assert.Equal(t, prove.MaxExecutions, r.Violations[0].Invariant)
	assert.Contains(t, r.Violations[0].Message, "ran 2 times")
}
