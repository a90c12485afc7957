package meter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestEndRunDropsTheRunsLedger(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 10}})
	pl, m := build(t, `{"budget":{"calls":1},"scope":"run"}`, model)
	defer pl.Close()
	var _ runtime.RunEnder = m
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	other := runtime.WithRun(context.Background(), runtime.Run{ID: "other"})
	for _, c := range []context.Context{ctx, other} {
		_, _, err := rt.Collect(c, pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
	}
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)

	pl.EndRun("r")
	assert.Equal(t, runtime.Ledger{}, m.Ledger("r"), "the run's ledger is dropped")
	assert.Equal(t, int64(1), m.Ledger("other").Calls, "other runs keep theirs")
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err, "a later call of the run id starts afresh")
	pl.EndRun("never seen")
}
