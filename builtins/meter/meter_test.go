package meter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func build(t *testing.T, config string, model runtime.ModelClient) (*runtime.Pipeline, *meter.Meter) {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
	require.NoError(t, err)
	return pl, pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
}

func TestCostUsesTheServedModelsRates(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}})
	pl, m := build(t, `{"scope":"global"}`, model)
	assert.InDelta(t, 18.0, m.Cost("primary", runtime.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}), 1e-9)
	assert.Zero(t, m.Cost("undeclared", runtime.Usage{InputTokens: 5}))
	_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "backup"}, 0)
	require.NoError(t, err)
	got := m.Ledger("any run")
	assert.InDelta(t, 2.0, got.USD, 1e-9)
	assert.Equal(t, int64(2_000_000), got.Tokens())
}

func TestUSDCeilingAndForget(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1_000_000}})
	pl, m := build(t, `{"budget":{"usd":5},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for range 2 { // 3 USD each: the second crosses 5 and is charged in full
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
	}
	assert.InDelta(t, 6.0, m.Ledger("r").USD, 1e-9)
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "usd", be.Resource)
	assert.Equal(t, 5.0, be.Limit)
	assert.Contains(t, be.Message(), "usd ceiling 5 reached")

	m.Forget("r")
	assert.Equal(t, runtime.Ledger{}, m.Ledger("r"))
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"tenant"}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, `scope must be "run" or "global"`)
}
