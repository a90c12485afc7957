package maxtokens_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/maxtokens"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestMaxTokens(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("max_tokens", `{"limit":100}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	// The longest run of words a request of 100 tokens holds, by the
	// estimate the layer reads, and one word more.
	words := func(n int) string { return strings.Repeat("hello ", n) }
	n := 1
	for runtime.EstimateRequest(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: words(n + 1)}}}) <= 100 {
		n++
	}
	require.Greater(t, n, 50)
	tests := []struct {
		name    string
		content string
		blocked bool
	}{
		{"small", "hello", false},
		{"at the limit", words(n), false},
		{"over", words(n + 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := model.Calls()
			_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary",
				Messages: []runtime.Message{{Role: "user", Content: tt.content}}}, 0)
			if !tt.blocked {
				require.NoError(t, err)
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "max_tokens", b.Layer)
			assert.Contains(t, b.Message, "over the limit of 100")
			assert.Equal(t, before, model.Calls(), "refused before the model runs")
		})
	}
	_, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("max_tokens", `{}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "limit must be at least 1")
}

// The tools offered and the response format's schema are input the provider
// reads and bills: a request that carries its bulk there is held to the limit
// as one carrying it in a message is.
func TestMaxTokensCountsToolsAndResponseFormat(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("max_tokens", `{"limit":100}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	bulk := strings.Repeat("x", 4000)
	schema := `{"type":"object","description":"` + bulk + `"}`
	tests := map[string]runtime.ChatRequest{
		"tool description": {Tools: []runtime.ToolDef{{Name: "lookup", Description: bulk}}},
		"tool parameters":  {Tools: []runtime.ToolDef{{Name: "lookup", Parameters: []byte(schema)}}},
		"response format":  {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "out", Schema: []byte(schema)}},
	}
	for name, req := range tests {
		t.Run(name, func(t *testing.T) {
			req.Model = "primary"
			req.Messages = []runtime.Message{{Role: "user", Content: "hello"}}
			before := model.Calls()
			_, _, err := rt.Collect(context.Background(), pl, req, 0)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "max_tokens", b.Layer)
			assert.Contains(t, b.Message, "over the limit of 100")
			assert.Equal(t, before, model.Calls(), "refused before the model runs")
		})
	}
}
