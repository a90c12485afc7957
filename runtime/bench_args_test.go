package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// BenchmarkToolArgs measures a tool call whose arguments are checked
// against a nested schema (objects in arrays, a $ref, a map of headers):
// the args validation on the hot path of every call.
func BenchmarkToolArgs(b *testing.B) {
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "bench"})
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("tracing", "")}})
	p.Tools = map[string]plan.Tool{"post": {Args: json.RawMessage(`{"type":"object",
		"$defs":{"item":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"},"note":{"type":"string"}}}},
		"properties":{"url":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}},
		"items":{"type":"array","items":{"$ref":"#/$defs/item"}},
		"customer":{"type":"object","properties":{"id":{"type":"string"},"email":{"type":"string"},"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}}}}}}}`)}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"post": echo}})
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{
		"url":      "https://api.example.com/v1/orders",
		"headers":  map[string]any{"Content-Type": "application/json", "X-Request-Id": "r1", "Accept": "*/*"},
		"customer": map[string]any{"id": "c1", "email": "a@example.com", "address": map[string]any{"city": "Lyon", "zip": "69001"}},
		"items": []any{
			map[string]any{"sku": "A", "qty": int64(1), "note": "x"},
			map[string]any{"sku": "B", "qty": int64(2)},
			map[string]any{"sku": "C", "qty": int64(3)},
		},
	}
	req := runtime.ToolRequest{Name: "post", Args: args}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Tool(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
