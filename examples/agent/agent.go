package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/agentc-dev/agentc"
	"github.com/agentc-dev/agentc/runtime"
)

// orders is the example's order book.
var orders = map[string]map[string]any{
	"A100": {"status": "delivered", "amount": 42.5, "currency": "EUR"},
	"B200": {"status": "delivered", "amount": 250.0, "currency": "EUR"},
}

// shop holds the refunds made, safe for concurrent tool calls.
type shop struct {
	mu      sync.Mutex
	refunds map[string]float64 // by idempotency key
}

func (s *shop) tools() map[string]runtime.ToolFunc {
	return map[string]runtime.ToolFunc{
		"lookup_order": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			id, _ := c.Args["order_id"].(string)
			o, ok := orders[id]
			if !ok {
				return map[string]any{"error": "no such order", "order_id": id}, nil
			}
			return o, nil
		},
		"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			id, _ := c.Args["order_id"].(string)
			// A float64, or an int64 for an integer above 2^53 (which no
			// refund here holds): refused rather than refunded as 0.
			amount, ok := c.Args["amount"].(float64)
			if !ok {
				return nil, fmt.Errorf("refund: amount %v is not an amount this shop refunds", c.Args["amount"])
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.refunds[c.IdempotencyKey()] = amount // the key makes a replay harmless
			return map[string]any{"refunded": amount, "order_id": id}, nil
		},
	}
}

// run answers one customer message with the agent loop of the policy in
// dir, printing the answer as it streams. models replaces the policy's
// clients by name (nil: the policy's provider, which needs its key).
func run(ctx context.Context, dir, input string, models map[string]runtime.ModelClient, out io.Writer) (runtime.AgentResult, error) {
	s := &shop{refunds: map[string]float64{}}
	pipe, err := agentc.Load(ctx, dir, runtime.Deps{Models: models, Tools: s.tools()})
	if err != nil {
		return runtime.AgentResult{}, err
	}
	defer pipe.Close()
	ctx = runtime.WithRun(ctx, runtime.Run{ID: "example-run"})
	res, err := pipe.RunAgent(ctx, runtime.AgentRequest{
		Model: "primary",
		Messages: []runtime.Message{{Role: "system", Content: "You are a support agent for a shop. " +
			"Use the tools to look orders up and to refund them. Be brief."}},
		Input:   input,
		OnDelta: func(_ int, d runtime.Delta) { fmt.Fprint(out, d.Text) },
	})
	fmt.Fprintln(out)
	return res, err
}
