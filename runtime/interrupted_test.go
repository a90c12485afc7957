package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

type cancelAfterKey struct{}

// cancelAfter is a tool middleware that cancels the call's context (the
// func the context carries) once the inner layers have returned: the call
// ends while nothing runs.
type cancelAfter struct{}

func (cancelAfter) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if cancel, ok := ctx.Value(cancelAfterKey{}).(context.CancelFunc); ok {
			cancel()
		}
		return v, err
	}
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.cancelafter", Stages: []plan.Stage{plan.StageTool}, New: func() runtime.Middleware { return cancelAfter{} },
	})
}

// A side-effecting tool that answered its own error (a rate limit) before
// its call's context ended was not interrupted: the error stays the tool's,
// not in doubt. One whose context ended while it ran is in doubt.
func TestOnlyAToolRunningWhenCancelledIsInDoubt(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("test.cancelafter", "")}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	build := func(fn runtime.ToolFunc) *runtime.Pipeline {
		return rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": fn}})
	}

	t.Run("answered before the cancel", func(t *testing.T) {
		pl := build(func(context.Context, *runtime.ToolCall) (any, error) {
			return nil, &runtime.CallError{Kind: runtime.KindRateLimited, Message: "slow down"}
		})
		ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}))
		defer cancel()
		_, err := pl.Tool(context.WithValue(ctx, cancelAfterKey{}, cancel), runtime.ToolRequest{Name: "refund"})
		require.Error(t, err)
		require.Error(t, ctx.Err(), "the call's context ended before Tool returned")
		assert.Equal(t, "rate_limited", runtime.KindOf(err), "%v", err)
		assert.NotErrorIs(t, err, runtime.ErrMayHaveRun)
	})
	t.Run("running when cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}))
		defer cancel()
		pl := build(func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			cancel()
			return nil, ctx.Err()
		})
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund"})
		require.Error(t, err)
		assert.Equal(t, "in_doubt", runtime.KindOf(err), "%v", err)
		assert.ErrorIs(t, err, runtime.ErrMayHaveRun)
	})
}
