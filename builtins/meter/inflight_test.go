package meter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A meter outside a rate_limit, on a shared store: a call the rate limit
// rejects holds its place under the calls ceiling for the round trips of
// its reservation, and a call arriving meanwhile was refused as final (a
// 402 SDKs do not retry) while nothing was spent. A refusal for the calls
// in flight alone is now to be tried again; once the ceiling is charged
// the refusal is final.
func TestARefusalForTheCallsInFlightIsToBeTriedAgain(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if req.Messages[0].Content == "slow" {
			close(started)
			<-release
		}
		yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10}})
		return nil
	})
	pl := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"budget":{"calls":1},"store":"shared","scope":"global"}`),
		rt.Layer("rate_limit", `{"rate":1,"per":"1h","burst":1,"mode":"reject","store":"shared"}`),
	}})
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	built := rt.Build(t, pl, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": storetest.Redis(t)}})
	req := func(text string) runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: text}}}
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := rt.Collect(context.Background(), built, req("slow"), 0)
		done <- err
	}()
	<-started
	_, _, err := rt.Collect(context.Background(), built, req("hi"), 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.True(t, be.InFlight(), "nothing is spent: the call in flight holds the place")
	assert.Contains(t, err.Error(), "try again once they end, or once those of a process that stopped lapse (lease 10m0s)",
		"the call in flight may be one of a process that stopped, whose place comes back at the end of its lease")
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "not final")
	assert.True(t, runtime.IsTransient(err))
	d, ok := runtime.RetryAfterOf(err)
	assert.True(t, ok)
	assert.Equal(t, runtime.InFlightRetryAfter, d)

	close(release)
	require.NoError(t, <-done)
	_, _, err = rt.Collect(context.Background(), built, req("hi"), 0)
	require.ErrorAs(t, err, &be)
	assert.False(t, be.InFlight())
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err), "the ceiling is charged: final")
}

// A tool call that makes a tool call of its own under the same meter (a
// tool that runs an agent turn, or calls another tool) holds a place in
// the ledger until the call it makes ends. The nested call refused for
// that place alone was to be tried again, though the place cannot come
// back while it waits: an agent turn inside told its model to try again
// until its steps ran out. It is final: only places other calls hold come
// back.
func TestARefusalForTheCallsOwnCallerIsFinal(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":1},"store":"s","scope":"run"}`)}})
			p.Tools = map[string]plan.Tool{"outer": {}, "inner": {}}
			p.Stores = map[string]plan.Store{"s": {Kind: "memory"}}
			backends := map[string]runtime.StoreBackend{"s": runtime.NewMemoryStore()}
			if store == "redis" {
				backends["s"] = storetest.Redis(t)
			}
			var pl *runtime.Pipeline
			pl = rt.Build(t, p, runtime.Deps{Backends: backends, Tools: map[string]runtime.ToolFunc{
				"inner": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
				"outer": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
					return pl.Tool(ctx, runtime.ToolRequest{Name: "inner", Args: map[string]any{}})
				},
			}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r-" + store})
			_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "outer", Args: map[string]any{}})
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be)
			assert.False(t, be.InFlight(), "the place is held by the call's own caller: %v", err)
			assert.Equal(t, runtime.ClassBudget, runtime.Classify(err))
		})
	}
}
