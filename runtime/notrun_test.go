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

// A call to a declared tool no function serves, and a chat call to a
// model no client serves, never reached a callee: the error says so
// (DidNotRun), so that a caller or a retry layer may send it again once
// the host supplies it.
func TestAnUnservedToolOrModelDidNotRun(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true}}
	p.Models = map[string]plan.Model{"backup": {}}
	pl := rt.Build(t, p, runtime.Deps{})

	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "transfer", Args: map[string]any{}})
	require.ErrorContains(t, err, `tool "transfer" is not registered`)
	assert.True(t, runtime.DidNotRun(err))
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)

	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "backup"}, 0)
	require.ErrorContains(t, err, `model "backup" is not registered`)
	assert.True(t, runtime.DidNotRun(err))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
}
