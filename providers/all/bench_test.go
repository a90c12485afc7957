package all_test

import (
	"context"
	"testing"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// typicalAgent is a policy of the agent benchmark: tracing, a meter with a
// budget, a rate limit, fallback and retry around the model; tracing, a
// meter, a rate limit, a CEL guard and retry around the tool.
const typicalAgent = `
tools: get_weather: {
	description: "Current weather in a city"
	args: {type: "object", required: ["location"], properties: {location: {type: "string"}, unit: {type: "string"}}}
}
chains: {
	chat: [
		{use: "tracing"},
		{use: "meter", budget: usd: 100},
		{use: "rate_limit", rate: 1000000000, per: "1s", burst: 1000000000},
		{use: "fallback", models: ["primary", "backup"]},
		{use: "retry", max_attempts: 2, initial_delay: "1ms"},
	]
	tool: [
		{use: "tracing"},
		{use: "meter", budget: calls: 1000000000},
		{use: "rate_limit", rate: 1000000000, per: "1s", burst: 1000000000},
		{use: "guard", name: "no_atlantis", tools: ["get_weather"], deny: "args.location.startsWith('Atlantis')",
			message: "Atlantis is off limits"},
		{use: "retry", max_attempts: 3, breaker: {failures: 5, cooldown: "30s"}},
	]
}
`

// BenchmarkAgentStep is one agent step through the typical policy: the
// model asks for get_weather (the tool_call.sse transcript: a call whose
// arguments come in eleven fragments), the call runs through the tool
// chain, its result goes back, and the model answers (text.sse: nine text
// deltas). "openai" is the openai client reading the transcripts, served
// from memory, through the official SDK; "model-in-memory" is a model
// that yields the same deltas from memory, which leaves the runtime's own
// cost.
func BenchmarkAgentStep(b *testing.B) {
	tr := ssetest.NewTransport(transcript(b, "openai", "tool_call.sse"), transcript(b, "openai", "text.sse"))
	oa, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: "sk-oa-test-key-1234", BaseURL: "http://127.0.0.1:9/v1", HTTPClient: tr.Client()})
	if err != nil {
		b.Fatal(err)
	}
	// The deltas the client yields for the two transcripts, replayed.
	var script [2][]runtime.Delta
	for i := range script {
		if script[i], err = ssetest.Collect(b, oa, runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Content: "hi"}}}); err != nil {
			b.Fatal(err)
		}
	}
	replay := runtime.ModelFunc(func(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		step := 0
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			step = 1
		}
		for _, d := range script[step] {
			if !yield(d) {
				return nil
			}
		}
		return nil
	})
	ran := 0
	tools := map[string]runtime.ToolFunc{"get_weather": func(context.Context, *runtime.ToolCall) (any, error) {
		ran++
		return map[string]any{"temperature": 18, "sky": "clear"}, nil
	}}
	for _, tc := range []struct {
		name  string
		model runtime.ModelClient
	}{{"openai", oa}, {"model-in-memory", replay}} {
		pl := loadWith(b, ssetest.New(b), ssetest.New(b), typicalAgent,
			runtime.Deps{Tools: tools, Models: map[string]runtime.ModelClient{"primary": tc.model, "backup": tc.model}})
		req := runtime.AgentRequest{Model: "primary", Messages: []runtime.Message{{Role: "system", Content: "You are a weather assistant."}},
			Input: "What is the weather in Paris?"}
		b.Run(tc.name, func(b *testing.B) {
			ran = 0
			b.ReportAllocs()
			for b.Loop() {
				res, err := pl.RunAgent(context.Background(), req)
				if err != nil || res.Steps != 2 || res.ToolCalls != 1 || res.Output != "Hello! How can I help you today?" {
					b.Fatalf("%+v: %v", res, err)
				}
			}
			if ran != b.N {
				b.Fatalf("the tool ran %d times in %d turns", ran, b.N)
			}
		})
	}
}
