package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// A compiled plan (agentc build) with a chat chain of fallback and retry and a
// tool chain with a guard.
const examplePlan = `{
  "version": 1, "policy": "example",
  "models": {"primary": {"usd_per_mtok_in": 3, "usd_per_mtok_out": 15},
             "backup": {"usd_per_mtok_in": 0.5, "usd_per_mtok_out": 1.5}},
  "tools": {"refund": {"side_effecting": true, "retry_safe": true}},
  "chains": {
    "chat": [{"use": "fallback", "name": "fallback", "config": {"models": ["primary", "backup"]}},
             {"use": "retry", "name": "retry", "config": {"max_attempts": 2, "initial_delay": "1ms", "max_delay": "1ms", "multiplier": 2}}],
    "tool": [{"use": "guard", "name": "refund_limit", "tools": ["refund"],
              "config": {"deny": "args.amount > 100.0", "message": "refunds over 100 need an approver", "phase": "before", "on_error": "closed"}}]
  }
}`

func Example() {
	p, err := plan.Decode("plan.json", []byte(examplePlan))
	if err != nil {
		panic(err)
	}
	words := func(model string, fail bool) runtime.ModelFunc {
		return func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			if fail {
				return &runtime.CallError{Kind: runtime.KindTransient, Status: 503, Message: model + " is down"}
			}
			for _, w := range strings.Fields("hello from " + model) {
				if !yield(runtime.Delta{Text: w + " "}) {
					return nil
				}
			}
			return nil
		}
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": words("primary", true), "backup": words("backup", false)},
		Tools: map[string]runtime.ToolFunc{"refund": func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			return fmt.Sprintf("refunded %v", c.Args["amount"]), nil
		}},
	})
	if err != nil {
		panic(err)
	}
	defer pl.Close()

	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	fmt.Printf("%q served by %s, err=%v\n", resp.Text, resp.Model, err)

	res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 40.0}})
	fmt.Println(res.Value, err)

	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 400.0}})
	var blocked *runtime.BlockedError
	fmt.Println(errors.As(err, &blocked), blocked.Layer, runtime.Classify(err).Final())
	// Output:
	// "hello from backup " served by backup, err=<nil>
	// refunded 40 <nil>
	// true refund_limit true
}

func ExamplePipeline_Chat() {
	p := &plan.Plan{Version: plan.Version, Policy: "bare"}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for _, w := range []string{"one", "two", "three"} {
			if !yield(runtime.Delta{Text: w}) {
				return nil
			}
		}
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"m": model}})
	if err != nil {
		panic(err)
	}
	s := pl.Chat(context.Background(), runtime.ChatRequest{Model: "m"})
	for d, err := range s.All() {
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Text)
		if d.Text == "two" {
			break // abandons the stream; the model stops
		}
	}
	fmt.Println(s.Response().Deltas, "deltas")
	// Output:
	// one
	// two
	// 2 deltas
}

// A plan with an admit predicate and a grounding section: the host's
// retriever answers, the admitted items reach the model as a system block.
func ExampleRetrieverFunc() {
	p, err := plan.Decode("plan.json", []byte(`{
  "version": 1, "policy": "grounded", "chains": {},
  "admit": {"stage": "admit", "source": "item.score >= 0.5"},
  "grounding": {"render": {"template": "Sources:{{range .Items}} [{{.ID}}] {{.Content}}{{end}}"}}
}`))
	if err != nil {
		panic(err)
	}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for _, m := range req.Messages {
			fmt.Printf("%s: %s\n", m.Role, m.Content)
		}
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{
		Models: map[string]runtime.ModelClient{"m": model},
		Retriever: runtime.RetrieverFunc(func(ctx context.Context, q runtime.RetrievalQuery) ([]runtime.Item, error) {
			return []runtime.Item{
				{ID: "kb-1", Content: "Refunds take 5 days.", Score: 0.9},
				{ID: "kb-2", Content: "Unrelated.", Score: 0.1},
			}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	defer pl.Close()
	_, _ = pl.Complete(context.Background(), runtime.ChatRequest{Model: "m",
		Messages: []runtime.Message{{Role: "user", Content: "How long do refunds take?"}}})
	// Output:
	// system: Sources: [kb-1] Refunds take 5 days.
	// user: How long do refunds take?
}
