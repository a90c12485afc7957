package contentfilter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestGroundingItemScreened: a retrieved item holding a banned word blocks
// the call naming the item, or with grounding "drop" is left out of the
// block while the others reach the model.
func TestGroundingItemScreened(t *testing.T) {
	build := func(t *testing.T, config string, model runtime.ModelClient) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", config))}})
		p.Grounding = &plan.Grounding{Render: &plan.GroundingRender{Template: "{{range .Items}}- {{.Content}}\n{{end}}"}}
		ret := runtime.RetrieverFunc(func(context.Context, runtime.RetrievalQuery) ([]runtime.Item, error) {
			return []runtime.Item{
				{ID: "a", Content: "apples keep", Score: 1},
				{ID: "b", Content: "the forbidden fruit", Source: "wiki", Score: 1},
			}, nil
		})
		return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Retriever: ret})
	}
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "fruit?"}}}

	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	_, err := build(t, filterConfig, model).Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, `grounding item "b" (source "wiki"): banned keyword "forbidden fruit"`, b.Message)
	assert.Zero(t, model.Calls())

	model = rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	_, err = build(t, `{"keywords":["forbidden fruit"],"grounding":"drop"}`, model).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 1, model.Calls())
	assert.Equal(t, "- apples keep\n", model.Requests()[0].Messages[0].Content)
}
