package judge_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	_ "github.com/agentc-dev/agentc/builtins/tracing"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestATracingInsideTheJudgeTracesItsCall pins that the verdict call gets a
// span of its own from a tracing layer inside the judge, in the caller's run.
func TestATracingInsideTheJudgeTracesItsCall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("judge", `{"model":"judge"}`),
		rt.Layer("tracing", ""),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	judge := rt.NewModel(rt.Response{Deltas: []string{"allow"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{TracerProvider: tp,
		Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
	require.NoError(t, err)

	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	var models, runs []string
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "agentc.model":
				models = append(models, kv.Value.AsString())
			case "agentc.run_id":
				runs = append(runs, kv.Value.AsString())
			}
		}
	}
	assert.Equal(t, []string{"primary", "judge"}, models, "the response's span, then the verdict's")
	assert.Equal(t, []string{"r1", "r1"}, runs, "the verdict call is in the caller's run")
}
