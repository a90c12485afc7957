package memoize_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestChatKeyCoversToolsAndParameters(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Text: "looking"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "search", Arguments: `{"q":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"go"}`}}, FinishReason: runtime.FinishToolCalls,
			Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 4}},
	}})
	other := rt.NewModel(rt.Response{Deltas: []string{"other"}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", "")}})
	p.Tools = map[string]plan.Tool{"search": {}} // read-only: its calls are replayed
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "other": other}})
	base := func() runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", MaxTokens: 100, Messages: []runtime.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "find go"}},
			Tools: []runtime.ToolDef{{Name: "search"}}}
	}
	first, err := pl.Complete(ctx1, base())
	require.NoError(t, err)
	require.False(t, first.Cached)

	again := base()
	again.Metadata = map[string]string{"trace": "t-2"}
	hit, err := pl.Complete(ctx1, again)
	require.NoError(t, err)
	assert.True(t, hit.Cached, "metadata does not change the output: same key")
	assert.Equal(t, "looking", hit.Text)
	require.Len(t, hit.ToolCalls, 1, "a hit replays the tool calls")
	assert.Equal(t, runtime.ToolUse{ID: hit.ToolCalls[0].ID, Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)}, hit.ToolCalls[0])
	assert.NotEqual(t, "call_1", hit.ToolCalls[0].ID, "with an id of its own")
	assert.Equal(t, runtime.FinishToolCalls, hit.FinishReason)
	assert.Equal(t, first.Usage, hit.Usage, "the recorded usage, cached tokens included")

	temp, seed, no := 0.5, int64(3), false
	variants := map[string]func(*runtime.ChatRequest){
		"system prompt": func(r *runtime.ChatRequest) { r.Messages[0].Content = "be thorough" },
		"max_tokens":    func(r *runtime.ChatRequest) { r.MaxTokens = 4000 },
		"tool schema":   func(r *runtime.ChatRequest) { r.Tools[0].Parameters = json.RawMessage(`{"type":"object"}`) },
		"strict tool":   func(r *runtime.ChatRequest) { r.Tools[0].Strict = true },
		"parallel":      func(r *runtime.ChatRequest) { r.ParallelToolCalls = &no },
		"betas":         func(r *runtime.ChatRequest) { r.Betas = []string{"output-128k-2025-02-19"} },
		"json schema": func(r *runtime.ChatRequest) {
			r.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "x", Schema: json.RawMessage(`{"type":"object"}`)}
		},
		"tools":       func(r *runtime.ChatRequest) { r.Tools = append(r.Tools, runtime.ToolDef{Name: "fetch"}) },
		"no tools":    func(r *runtime.ChatRequest) { r.Tools = []runtime.ToolDef{} },
		"temperature": func(r *runtime.ChatRequest) { r.Temperature = &temp },
		"top_p":       func(r *runtime.ChatRequest) { r.TopP = &temp },
		"stop":        func(r *runtime.ChatRequest) { r.Stop = []string{"END"} },
		"seed":        func(r *runtime.ChatRequest) { r.Seed = &seed },
		"tool_choice": func(r *runtime.ChatRequest) { r.ToolChoice = "required" },
		"response_format": func(r *runtime.ChatRequest) {
			r.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONObject}
		},
		"parts": func(r *runtime.ChatRequest) {
			r.Messages = []runtime.Message{{Role: "user", Content: "find go", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://x/a.png"}}}}
		},
	}
	calls := model.Calls()
	for name, change := range variants {
		req := base()
		change(&req)
		resp, err := pl.Complete(ctx1, req)
		require.NoError(t, err)
		assert.False(t, resp.Cached, name)
		calls++
		assert.Equal(t, calls, model.Calls(), name)
	}
	req := base()
	req.Model = "other"
	resp, err := pl.Complete(ctx1, req)
	require.NoError(t, err)
	assert.False(t, resp.Cached, "model")
	assert.Equal(t, "other", resp.Text)
}

// TestContentFilteredResponseIsNotCached: a response the provider's filter
// cut is the filter's refusal, not the model's answer: it is not stored, so
// the same request asks the model again instead of being refused for ttl.
func TestContentFilteredResponseIsNotCached(t *testing.T) {
	model := rt.NewModel(
		rt.Response{Stream: []runtime.Delta{{Text: "I can't", FinishReason: runtime.FinishContentFilter}}},
		rt.Response{Stream: []runtime.Delta{{Text: "Here it is", FinishReason: runtime.FinishStop}}},
	)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := func() runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "q"}}}
	}
	first, err := pl.Complete(ctx1, req())
	require.NoError(t, err)
	assert.Equal(t, runtime.FinishContentFilter, first.FinishReason)
	second, err := pl.Complete(ctx1, req())
	require.NoError(t, err)
	assert.False(t, second.Cached, "the filtered response was not stored")
	assert.Equal(t, "Here it is", second.Text)
	third, err := pl.Complete(ctx1, req())
	require.NoError(t, err)
	assert.True(t, third.Cached, "the model's answer is")
	assert.Equal(t, 2, model.Calls())
}
