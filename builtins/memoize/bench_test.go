package memoize_test

import (
	"context"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func BenchmarkToolHit(b *testing.B) {
	search := rt.NewTool(rt.ToolResult{Value: map[string]any{"hits": []any{"a", "b"}}})
	pl := rt.Build(b, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "refund policy", "n": 3}}
	if _, err := pl.Tool(ctx1, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := pl.Tool(ctx1, req); err != nil || !r.Cached {
			b.Fatal("miss", err)
		}
	}
}

func BenchmarkChatHit(b *testing.B) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hel", "lo"}})
	pl := rt.Build(b, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	yield := func(runtime.Delta) bool { return true }
	ctx := context.Background()
	if _, err := pl.Stream(ctx, req, yield); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := pl.Stream(ctx, req, yield); err != nil || !r.Cached {
			b.Fatal("miss", err)
		}
	}
}
