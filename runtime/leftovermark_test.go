package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestAnOwnCallLeftRunningDoesNotMarkALaterCall: a tool that makes a
// side-effecting call of its own on a goroutine and returns without
// waiting for it (a tool racing two backends, or one with a deadline of
// its own) left that goroutine to mark the tool's call (ToolCall.Delegated)
// once its own call came back, which could be after the pipeline had
// returned the call to its pool and handed it to a later call: that later
// call, a read-only lookup failing transiently, was then not run again by
// a retry, and the write raced with the call's reuse (go test -race).
func TestAnOwnCallLeftRunningDoesNotMarkALaterCall(t *testing.T) {
	var pl *runtime.Pipeline
	entered, done := make(chan struct{}), make(chan struct{})
	var attempts atomic.Int64
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms"}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "spawn": {}, "lookup": {}}
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}, Tools: map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			entered <- struct{}{}
			return "ok", nil
		},
		"spawn": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			go func() {
				defer func() { done <- struct{}{} }()
				_, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order": 9}})
			}()
			<-entered
			return "spawned", nil
		},
		"lookup": func(context.Context, *runtime.ToolCall) (any, error) {
			if attempts.Add(1)%2 == 1 {
				return nil, &runtime.CallError{Kind: runtime.KindTransient, Message: "lookup backend unavailable"}
			}
			return "looked up", nil
		},
	}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for i := range 300 {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "spawn", Args: map[string]any{}})
		require.NoError(t, err)
		_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}})
		<-done
		if !assert.NoError(t, err, "lookup %d was run again after its transient failure", i) {
			return
		}
	}
}
