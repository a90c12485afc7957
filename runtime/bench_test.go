package runtime_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

type runKeyType struct{}

var runKey = runKeyType{}

// echo is the tool of the benchmarks: it does no work, so the numbers are the
// pipeline's overhead.
func echo(context.Context, *runtime.ToolCall) (any, error) { return staticResult, nil }

// handwrittenLayer is a pass-through middleware written as a plain closure.
func handwrittenLayer(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) { return next(ctx, c) }
}

// BenchmarkToolChain compares six pass-through layers built from a plan with
// the same six layers folded by hand, each call carrying the same per-call
// state (a ToolCall with the run from the context, the tool looked up by
// name). "typical" is a realistic tool chain with in-memory state.
func BenchmarkToolChain(b *testing.B) {
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "bench"})
	args := map[string]any{"order_id": "A1", "amount": 50.0}
	req := runtime.ToolRequest{Name: "refund", Args: args}

	b.Run("compiled", func(b *testing.B) {
		var layers []plan.Layer
		for range 6 {
			layers = append(layers, rt.Layer("test.pass", ""))
		}
		pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: layers}),
			runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": echo}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Tool(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})

	// The hand-written chain keeps the same per-call state as Pipeline.Tool:
	// a recycled call struct with the run from the context.
	b.Run("handwritten", func(b *testing.B) {
		ctx := context.WithValue(context.Background(), runKey, &runtime.Run{ID: "bench"})
		tools := map[string]runtime.ToolFunc{"refund": echo}
		h := runtime.ToolHandler(func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			return tools[c.Name](ctx, c)
		})
		for range 6 {
			h = handwrittenLayer(h)
		}
		pool := sync.Pool{New: func() any { return new(runtime.ToolCall) }}
		b.ReportAllocs()
		for b.Loop() {
			c := pool.Get().(*runtime.ToolCall)
			c.Name, c.Args, c.Meta.Attempts = req.Name, req.Args, 1
			if r, ok := ctx.Value(runKey).(*runtime.Run); ok {
				c.Meta.Run = *r
			}
			if _, err := h(ctx, c); err != nil {
				b.Fatal(err)
			}
			*c = runtime.ToolCall{}
			pool.Put(c)
		}
	})

	// The floor: the same six closures around the tool, called directly
	// with one reused call struct, no lookup and no per-call state. It is
	// what no dispatching runtime can beat.
	b.Run("handwritten-direct", func(b *testing.B) {
		h := runtime.ToolHandler(echo)
		for range 6 {
			h = handwrittenLayer(h)
		}
		c := &runtime.ToolCall{}
		b.ReportAllocs()
		for b.Loop() {
			c.Name, c.Args, c.Meta.Attempts = req.Name, req.Args, 1
			if _, err := h(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("typical", func(b *testing.B) {
		guard := rt.Named("refund_limit", rt.Layer("guard", `{"deny":"has(args.amount) && args.amount > 100.0 && !has(args.approved_by)"}`))
		guard.Tools = []string{"refund"}
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{
			rt.Layer("tracing", ""),
			rt.Layer("meter", `{"budget":{"calls":1000000000}}`),
			rt.Layer("rate_limit", `{"rate":1000000000,"per":"1s","burst":1000000000}`),
			guard,
			rt.Layer("retry", `{"max_attempts":3,"breaker":{"failures":5,"cooldown":"30s"}}`),
		}})
		p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true, Args: json.RawMessage(
			`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"approved_by":{"type":"string"}}}`)}}
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": echo}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Tool(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// oneDelta is the model of the resilience benchmark: one delta with usage.
var oneDelta = runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	yield(runtime.Delta{Text: "ok", Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
	return nil
})

// resilience builds the chat chain of the resilience benchmark, fallback
// and retry with a breaker, over model (serving both primary and backup).
func resilience(tb testing.TB, model runtime.ModelClient) *runtime.Pipeline {
	return rt.Build(tb, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("fallback", `{"models":["primary","backup"]}`),
		rt.Layer("retry", `{"max_attempts":3,"breaker":{"failures":5,"cooldown":"30s"}}`),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
}

// manyDeltas streams 64 text deltas, then the finish reason and usage.
var manyDeltas = runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	for range 64 {
		if !yield(runtime.Delta{Text: "token "}) {
			return nil
		}
	}
	yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 64}})
	return nil
})

func benchStream(b *testing.B, pl *runtime.Pipeline) {
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "bench"})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	yield := func(runtime.Delta) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Stream(ctx, req, yield); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResilience is a chat chain of fallback and retry with a breaker on
// the happy path: the primary answers at once.
func BenchmarkResilience(b *testing.B) { benchStream(b, resilience(b, oneDelta)) }

// BenchmarkTextDeltas streams 64 text deltas through the resilience chain:
// the per-delta cost of the chat path (ns/op over 65 deltas).
func BenchmarkTextDeltas(b *testing.B) { benchStream(b, resilience(b, manyDeltas)) }
