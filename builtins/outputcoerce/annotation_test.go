package outputcoerce_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestAnnotationOfACacheReplay(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("memoize", ""),
		rt.Named("shape", rt.Layer("output_coerce", `{"mode":"annotate","schema":{"type":"object","required":["n"]}}`)),
	}})
	calls := 0
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		calls++
		yield(runtime.Delta{Text: `{"n":1.5,"tags":["a"]}`})
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	defer pl.Close()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	want := outputcoerce.Annotation{Valid: true, Value: map[string]any{"n": json.Number("1.5"), "tags": []any{"a"}}}
	for i, cached := range []bool{false, true} {
		resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		require.NoError(t, err)
		assert.Equal(t, cached, resp.Cached, i)
		a, ok := outputcoerce.AnnotationOf(resp, "shape")
		require.True(t, ok, "call %d", i)
		assert.Equal(t, want, a, "call %d", i)
	}
	assert.Equal(t, 1, calls)

	invalid := runtime.ChatResponse{Annotations: map[string]any{"shape": map[string]any{
		"valid": false, "diagnostics": []any{map[string]any{"path": "/n", "message": "missing"}}}}}
	a, ok := outputcoerce.AnnotationOf(invalid, "shape")
	require.True(t, ok)
	assert.Equal(t, outputcoerce.Annotation{Diagnostics: []outputcoerce.Diagnostic{{Path: "/n", Message: "missing"}}}, a)
	_, ok = outputcoerce.AnnotationOf(runtime.ChatResponse{Annotations: map[string]any{"shape": map[string]any{"other": 1}}}, "shape")
	assert.False(t, ok, "not an annotation")
	_, ok = outputcoerce.AnnotationOf(runtime.ChatResponse{}, "shape")
	assert.False(t, ok)
}
