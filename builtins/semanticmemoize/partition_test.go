package semanticmemoize_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestChatPartitionCoversRequestShape: the embedder below says every
// conversation is the same, so only the partition tells requests apart. A
// request that differs in anything that changes the answer's meaning or
// shape (the tools offered, tool_choice, the response format, the system
// prompt, the model, sampling, stop sequences, max_tokens) never gets
// another's answer; metadata and prompt-cache breakpoints, which change
// neither, still hit.
func TestChatPartitionCoversRequestShape(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"answer"}})
	other := rt.NewModel(rt.Response{Deltas: []string{"other's answer"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"threshold": 0.5}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "other": other}, Embedder: fixedEmbedder{}})
	base := func() runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", MaxTokens: 100, Messages: []runtime.Message{
			{Role: "system", Content: "Answer in English."}, {Role: "user", Content: "capital of France?"}},
			Tools: []runtime.ToolDef{{Name: "search", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	}
	_, resp, err := rt.Collect(ctx1, pl, base(), 0)
	require.NoError(t, err)
	require.False(t, resp.Cached)

	bp := &runtime.CacheControl{Type: "ephemeral"}
	for name, change := range map[string]func(*runtime.ChatRequest){
		"same":     func(*runtime.ChatRequest) {},
		"metadata": func(r *runtime.ChatRequest) { r.Metadata = map[string]string{"trace": "t-2"} },
		"breakpoint": func(r *runtime.ChatRequest) {
			r.Messages[0] = runtime.Message{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "Answer in English.", CacheControl: bp}}}
			r.CacheControl = bp
		},
		"near-duplicate question": func(r *runtime.ChatRequest) { r.Messages[1].Content = "France's capital?" },
	} {
		req := base()
		change(&req)
		_, resp, err := rt.Collect(ctx1, pl, req, 0)
		require.NoError(t, err)
		assert.True(t, resp.Cached, name)
	}
	require.Equal(t, 1, model.Calls())

	temp, seed, no := 0.7, int64(3), false
	for name, change := range map[string]func(*runtime.ChatRequest){
		"system prompt": func(r *runtime.ChatRequest) { r.Messages[0].Content = "Answer in French." },
		"developer added": func(r *runtime.ChatRequest) {
			r.Messages = append(r.Messages[:1], append([]runtime.Message{{Role: "system", Content: "Be terse."}}, r.Messages[1:]...)...)
		},
		"model":      func(r *runtime.ChatRequest) { r.Model = "other" },
		"max_tokens": func(r *runtime.ChatRequest) { r.MaxTokens = 4000 },
		"tools":      func(r *runtime.ChatRequest) { r.Tools = append(r.Tools, runtime.ToolDef{Name: "fetch"}) },
		"no tools":   func(r *runtime.ChatRequest) { r.Tools = []runtime.ToolDef{} },
		"tool schema": func(r *runtime.ChatRequest) {
			r.Tools[0].Parameters = json.RawMessage(`{"type":"object","required":["q"]}`)
		},
		"strict tool": func(r *runtime.ChatRequest) { r.Tools[0].Strict = true },
		"tool_choice": func(r *runtime.ChatRequest) { r.ToolChoice = "required" },
		"parallel":    func(r *runtime.ChatRequest) { r.ParallelToolCalls = &no },
		"json object": func(r *runtime.ChatRequest) {
			r.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONObject}
		},
		"json schema": func(r *runtime.ChatRequest) {
			r.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "city", Schema: json.RawMessage(`{"type":"object"}`)}
		},
		"temperature": func(r *runtime.ChatRequest) { r.Temperature = &temp },
		"top_p":       func(r *runtime.ChatRequest) { r.TopP = &temp },
		"seed":        func(r *runtime.ChatRequest) { r.Seed = &seed },
		"stop":        func(r *runtime.ChatRequest) { r.Stop = []string{"\n"} },
		"betas":       func(r *runtime.ChatRequest) { r.Betas = []string{"output-128k-2025-02-19"} },
	} {
		req := base()
		change(&req)
		_, resp, err := rt.Collect(ctx1, pl, req, 0)
		require.NoError(t, err, name)
		assert.False(t, resp.Cached, name)
	}
}

// TestSecretResultToolPassesThrough: a tool declared secret_result is never
// cached: the index would hold the secret outside its run.
func TestSecretResultToolPassesThrough(t *testing.T) {
	vault := rt.NewTool(rt.ToolResult{Value: "s3cr3t"})
	p := toolPlan(`{"scope": "global"}`)
	p.Tools["vault"] = plan.Tool{SecretResult: true}
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"vault": vault.Func()}})
	for _, run := range []string{"run-1", "run-2"} {
		r, err := pl.Tool(runtime.WithRun(ctx1, runtime.Run{ID: run}), runtime.ToolRequest{Name: "vault", Args: map[string]any{"k": "db"}})
		require.NoError(t, err)
		assert.False(t, r.Cached, run)
	}
	assert.Equal(t, 2, vault.Calls())
}

// TestSharedSystemPromptIsNotEmbedded: the system prompt is matched exactly,
// not embedded; embedded, a long prompt two requests share made two
// unrelated questions score 0.905 with the default embedder (0.085 without).
func TestSharedSystemPromptIsNotEmbedded(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"In transit."}}, rt.Response{Deltas: []string{"Send us a photo."}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"threshold": 0.9}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	sys := "You are the support assistant of Acme Parcels. Answer politely, cite the policy section, never promise refunds above 100 EUR, escalate legal questions to a human agent, and keep answers under five sentences."
	ask := func(q string) string {
		text, _, err := rt.Collect(ctx1, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "system", Content: sys}, {Role: "user", Content: q}}}, 0)
		require.NoError(t, err)
		return text
	}
	assert.Equal(t, "In transit.", ask("Where is my parcel 1234?"))
	assert.Equal(t, "Send us a photo.", ask("Can I get a refund for a broken vase?"))
	assert.Equal(t, "In transit.", ask("Where is my parcel 1234?"), "the same question hits")
	assert.Equal(t, 2, model.Calls())
}
