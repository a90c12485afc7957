package retry_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const again = `{"max_attempts":3,"attempt_timeout":"20ms","initial_delay":"1ms","max_delay":"1ms"}`

// effectsPlan is a plan with a retry on the tool chain that allows
// undeclared tools and declares tools.
func effectsPlan(tools map[string]plan.Tool) *plan.Plan {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", again)}})
	p.Tools = tools
	return p
}

// TestRetryDoesNotRunAgainAToolThatMayHaveActed: an undeclared tool (its
// effects unknown) and a declared side-effecting tool without retry_safe
// (a plan that was not vetted) that act and then fail transiently, or
// outlast the attempt_timeout, run once: the failure is returned, saying
// why it was not retried.
func TestRetryDoesNotRunAgainAToolThatMayHaveActed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools map[string]plan.Tool
	}{
		{"undeclared", nil},
		{"declared side-effecting", map[string]plan.Tool{"t": {SideEffecting: true}}},
	} {
		for what, result := range map[string]rt.ToolResult{
			"transient failure": {Err: rt.Transient("upstream reset")},
			"attempt timeout":   {Hang: true},
		} {
			t.Run(tc.name+"/"+what, func(t *testing.T) {
				tool := rt.NewTool(result, rt.ToolResult{Value: "second"})
				pl := rt.Build(t, effectsPlan(tc.tools), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
				res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
				require.Error(t, err)
				assert.Equal(t, 1, tool.Calls(), "the tool acted once; it is not run again")
				assert.Equal(t, 1, res.Attempts)
				assert.Contains(t, err.Error(), "did not run the call again")
				assert.Contains(t, err.Error(), "does not prove it did not act")
			})
		}
	}
}

// TestRetryRunsAgainWhatIsSafeToRunAgain: a retry_safe tool, a read-only
// one, and a tool of unknown effects whose failure proves it did not act
// (refused before it ran, a connection refused before the request was
// sent) are retried.
func TestRetryRunsAgainWhatIsSafeToRunAgain(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name  string
		tools map[string]plan.Tool
		err   error
	}{
		{"retry_safe", map[string]plan.Tool{"t": {SideEffecting: true, RetrySafe: true}}, rt.Transient("503")},
		{"read-only", map[string]plan.Tool{"t": {}}, rt.Transient("503")},
		{"refused by an inner layer", nil, runtime.NotRun(rt.Transient("rate limited"))},
		{"store unavailable", nil, &runtime.CallError{Layer: "rl", Err: runtime.StoreUnavailable(errors.New("redis down"))}},
		{"connection refused", nil, &runtime.CallError{Kind: runtime.KindTransient, Err: refused}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := rt.NewTool(rt.ToolResult{Err: tc.err}, rt.ToolResult{Value: "second"})
			pl := rt.Build(t, effectsPlan(tc.tools), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
			res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
			require.NoError(t, err)
			assert.Equal(t, "second", res.Value)
			assert.Equal(t, 2, tool.Calls())
		})
	}
}

// TestRetryDoesNotRunAgainACallThatMayHaveRun: a failure marked
// runtime.MayHaveRun is in doubt, not transient, whatever the tool.
func TestRetryDoesNotRunAgainACallThatMayHaveRun(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Err: runtime.MayHaveRun(rt.Transient("connection lost"))}, rt.ToolResult{Value: "second"})
	pl := rt.Build(t, effectsPlan(map[string]plan.Tool{"t": {SideEffecting: true, RetrySafe: true}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.ErrorIs(t, err, runtime.ErrMayHaveRun)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
	assert.Equal(t, 1, tool.Calls())
}
