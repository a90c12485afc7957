package prove_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// boundedPolicy is a clean policy whose exploration at k = 3 runs a few
// hundred states over two targets.
const boundedPolicy = `package p

tools: refund: {side_effecting: true, retry_safe: true, args: {type: "object", required: ["order_id"], properties: order_id: type: "string"}}
chains: tool: [
	{use: "audit", trail: "logical"},
	{use: "retry", max_attempts: 3, initial_delay: "10ms"},
]
`

func boundedPlan(t *testing.T) (*plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(boundedPolicy), 0o644))
	comp, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, comp.Plan, "%v", comp.Diagnostics)
	return comp.Plan, dir
}

// TestMaxStatesStopsTheExploration: a state bound stops the exploration at
// exactly that many states, says so, and reports the depth every target
// was explored to; without it the same policy is explored to the end.
func TestMaxStatesStopsTheExploration(t *testing.T) {
	p, dir := boundedPlan(t)
	full, err := prove.Explore(context.Background(), p, prove.Options{Depth: 3, Dir: dir})
	require.NoError(t, err)
	assert.True(t, full.Complete())
	assert.Equal(t, 3, full.Proved)
	assert.Equal(t, full.Targets, full.Done)

	// The first level of the three targets (one call, two concurrent copies
	// one after the other and admitted together) is 3 × 6 states (a
	// tool's alphabet); a bound a little above it finishes k = 1 and stops
	// inside k = 2.
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: 3, Dir: dir, MaxStates: 20})
	require.NoError(t, err)
	assert.False(t, r.Complete())
	assert.Equal(t, prove.BoundMaxStates, r.Bound)
	assert.Equal(t, 20, r.States)
	assert.Equal(t, 1, r.Proved, "every target explored to k=1, none to k=2")
	assert.Less(t, r.Done, r.Targets)
	assert.Empty(t, r.Violations)

	// A bound above the states the exploration needs does not stop it
	// (the count varies by a few states between runs: concurrent copies).
	r, err = prove.Explore(context.Background(), p, prove.Options{Depth: 3, Dir: dir, MaxStates: 2 * full.States})
	require.NoError(t, err)
	assert.True(t, r.Complete(), "bound %s", r.Bound)
	assert.Equal(t, 3, r.Proved)
}

// TestTimeoutStopsTheExploration: a wall-time bound already passed stops
// the exploration before its first state.
func TestTimeoutStopsTheExploration(t *testing.T) {
	p, dir := boundedPlan(t)
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: 3, Dir: dir, Timeout: time.Nanosecond})
	require.NoError(t, err)
	assert.Equal(t, prove.BoundTimeout, r.Bound)
	assert.Equal(t, 0, r.Proved)
	assert.Zero(t, r.States)
}

// TestInterruptedExploration: a cancelled context stops the exploration
// with its error (a caller that checks only the error and the violations
// never takes it for a clean proof), and the report of what it ran.
func TestInterruptedExploration(t *testing.T) {
	p, dir := boundedPlan(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := prove.Explore(ctx, p, prove.Options{Depth: 3, Dir: dir})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, r)
	assert.Equal(t, prove.BoundInterrupted, r.Bound)
	assert.False(t, r.Complete())
}

// TestProgress: the progress callback sees the states climb to the total,
// and the targets done reach the targets.
func TestProgress(t *testing.T) {
	p, dir := boundedPlan(t)
	var seen []prove.Progress
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: 2, Dir: dir,
		Progress: func(pr prove.Progress) { seen = append(seen, pr) }})
	require.NoError(t, err)
	require.Len(t, seen, r.States, "with no interval, one call per state")
	for i := 1; i < len(seen); i++ {
		assert.GreaterOrEqual(t, seen[i].States, seen[i-1].States)
	}
	last := seen[len(seen)-1]
	assert.Equal(t, r.States, last.States)
	assert.Equal(t, r.Targets, last.Targets)
	assert.Equal(t, 2, last.Depth)
}
