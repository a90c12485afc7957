package idempotent_test

import (
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func BenchmarkReplay(b *testing.B) {
	tool := rt.NewTool(rt.ToolResult{Value: map[string]any{"refund_id": "R1"}})
	pl := rt.Build(b, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 50}}
	if _, err := pl.Tool(ctx1, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := pl.Tool(ctx1, req); err != nil || !r.Deduped {
			b.Fatal("not deduped", err)
		}
	}
}
