package pii_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestGroundingBlockScanned: the grounding block is retrieved text, not the
// operator's: system: false does not leave it alone when it is placed as a
// system message.
func TestGroundingBlockScanned(t *testing.T) {
	build := func(t *testing.T, config string, model runtime.ModelClient) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("privacy", rt.Layer("pii", config))}})
		p.Grounding = &plan.Grounding{Render: &plan.GroundingRender{Template: "{{range .Items}}{{.Content}}\n{{end}}"}}
		ret := runtime.RetrieverFunc(func(context.Context, runtime.RetrievalQuery) ([]runtime.Item, error) {
			return []runtime.Item{{Content: "escalate to jane.doe@example.com", Score: 1}}, nil
		})
		return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Retriever: ret})
	}
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "system", Content: "support bot for ops@example.com"}, {Role: "user", Content: "who handles refunds?"}}}

	model := &recordingModel{}
	_, err := build(t, `{"system":false}`, model).Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "privacy", b.Layer)
	assert.Equal(t, "grounding item #0: personal data (email)", b.Message, "the item is named, never the data")
	assert.Empty(t, model.seen)

	model = &recordingModel{}
	_, err = build(t, `{"system":false,"grounding":"drop"}`, model).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.Len(t, model.seen[0], 2, "the item holding personal data is left out: no block is injected")

	model = &recordingModel{}
	_, err = build(t, `{"system":false,"action":"redact"}`, model).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	sent := model.seen[0]
	require.Len(t, sent, 3)
	assert.Equal(t, "support bot for ops@example.com", sent[0].Content, "the operator's system prompt is left alone")
	assert.Equal(t, "escalate to [REDACTED:email]\n", sent[1].Content, "the grounding block is redacted")

	model = &recordingModel{}
	_, err = build(t, `{"system":false,"action":"redact","grounding":"block"}`, model).Complete(context.Background(), req)
	require.ErrorAs(t, err, &b, "grounding block blocks whatever the action")
	assert.Equal(t, "grounding item #0: personal data (email)", b.Message)
	assert.Empty(t, model.seen)
}
