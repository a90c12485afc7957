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
// why it was not retried (a transient one) or that the tool may have acted
// (the attempt timed out while it ran: in doubt).
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
				if result.Hang {
					assert.ErrorIs(t, err, runtime.ErrMayHaveRun)
					assert.Contains(t, err.Error(), "may have made its effect")
					return
				}
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

// TestAnAttemptTimeoutOfARunningToolIsInDoubt: a side-effecting tool, not
// retry_safe, that was running when its attempt ran out of time may have
// made its effect, as when its caller cancels it: the failure is in doubt
// (final), so that no caller, agent turn or audit outside reads it as a
// failure that did not happen and makes the call again. A retry_safe tool's
// and a tool's own refusal before its attempt ended stay timeouts and
// failures.
func TestAnAttemptTimeoutOfARunningToolIsInDoubt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tool   plan.Tool
		result rt.ToolResult
		doubt  bool
	}{
		{"side-effecting, running", plan.Tool{SideEffecting: true}, rt.ToolResult{Hang: true}, true},
		{"retry_safe, running", plan.Tool{SideEffecting: true, RetrySafe: true}, rt.ToolResult{Hang: true}, false},
		{"side-effecting, refused at once", plan.Tool{SideEffecting: true}, rt.ToolResult{Err: rt.Permanent("no such order")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := rt.NewTool(tc.result, tc.result, tc.result)
			pl := rt.Build(t, effectsPlan(map[string]plan.Tool{"t": tc.tool}), runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
			require.Error(t, err)
			if tc.doubt {
				assert.ErrorIs(t, err, runtime.ErrMayHaveRun)
				assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
				assert.Equal(t, 1, tool.Calls(), "not run again")
				return
			}
			assert.NotErrorIs(t, err, runtime.ErrMayHaveRun)
			assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
		})
	}
}
