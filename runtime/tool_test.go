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

// TestToolNotRunWhenCancelled: a tool may have effects, so a call whose
// context already ended never reaches it, whatever the chain (empty, or
// layers that do not check the context themselves).
func TestToolNotRunWhenCancelled(t *testing.T) {
	tests := []struct {
		name  string
		chain []plan.Layer
	}{
		{"empty chain", nil},
		{"pass-through", []plan.Layer{rt.Layer("test.pass", "")}},
		{"retry", []plan.Layer{rt.Layer("retry", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := 0
			pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: tt.chain}), runtime.Deps{
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					ran++
					return "paid", nil
				}},
			})
			require.NoError(t, err)
			t.Cleanup(func() { _ = pl.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 5.0}})
			require.ErrorIs(t, err, context.Canceled)
			assert.Nil(t, res.Value)
			assert.Zero(t, ran, "the tool ran for a cancelled call")
		})
	}
}
