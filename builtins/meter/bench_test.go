package meter_test

import (
	"context"
	"testing"

	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// BenchmarkChat measures a model call through a meter with a budget that
// refuses a call crossing it, a retry inside, in process memory.
func BenchmarkChat(b *testing.B) {
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "ok", Usage: runtime.Usage{InputTokens: 10, OutputTokens: 1}})
		return nil
	})
	pl := rt.Build(b, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"budget":{"usd":1e12,"calls":1000000000000},"scope":"global","on_cross":"refuse"}`),
		rt.Layer("retry", `{"max_attempts":3}`),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 100, Messages: []runtime.Message{{Role: "user", Content: "Where is order A1234?"}}}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
