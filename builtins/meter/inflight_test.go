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
