package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"testing"

	_ "github.com/agentc-dev/agentc/builtins/guard"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// FuzzToolArgs: a model's arguments of any text reach the tool chain, its
// args schema's numeric bounds and a guard reading them without a panic,
// and a call that runs holds numbers within the bounds as the tool gets
// them: an amount above 0 and at most 100, an account other than the one
// the guard denies.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{`{"amount": 5}`, `{"amount": 100.000000000000000001}`, `{"amount": 1e400}`, `{"amount": -0}`,
		`{"amount": 5, "account": 9007199254740993}`, `{"amount": 5, "account": 9007199254740993.0}`, `{"amount": 5, "account": 9.007199254740993e15}`,
		`{"amount": 5, "account": 9223372036854775808}`, `{"amount": 1e-400}`, `{"amount": 5, "n": [1e999999999]}`, `{"amount": 0.01, "account": -9223372036854775808}`} {
		f.Add([]byte(s))
	}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("protected", rt.Layer("guard", `{"deny": "has(args.account) && args.account == 9007199254740993", "on_error": "closed"}`)),
		rt.Named("untyped", rt.Layer("guard", `{"deny": "has(args.n) && args.n == 9007199254740993", "on_error": "closed"}`)),
	}})
	p.Chains.Tool[0].Tools = []string{"pay"}
	p.Tools = map[string]plan.Tool{
		"pay": {Args: json.RawMessage(`{"type": "object", "required": ["amount"], "properties": {
			"amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 100, "multipleOf": 0.01},
			"account": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807}}}`)},
	}
	var got map[string]any
	pl := rt.Build(f, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": func(_ context.Context, c *runtime.ToolCall) (any, error) {
		got = c.Args
		return "ok", nil
	}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "fuzz"})
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := runtime.ToolUse{ID: "c1", Name: "pay", Arguments: data}.Request()
		if err != nil {
			return
		}
		got = nil
		_, err = pl.Tool(ctx, req)
		var blocked *runtime.BlockedError
		if err != nil && !errors.As(err, &blocked) {
			t.Fatalf("%s: %v", data, err)
		}
		if got == nil {
			return
		}
		amount := exactRat(t, got["amount"])
		if amount.Sign() <= 0 || amount.Cmp(big.NewRat(100, 1)) > 0 {
			t.Fatalf("%s: ran with amount %v", data, got["amount"])
		}
		if a, ok := got["account"]; ok && exactRat(t, a).Cmp(new(big.Rat).SetInt64(9007199254740993)) == 0 {
			t.Fatalf("%s: ran on the protected account", data)
		}
	})
}

// exactRat returns the number v holds (a float64 or an int64) exactly.
func exactRat(t *testing.T, v any) *big.Rat {
	switch x := v.(type) {
	case float64:
		return new(big.Rat).SetFloat64(x)
	case int64:
		return new(big.Rat).SetInt64(x)
	}
	t.Fatalf("the tool got %T %v", v, v)
	return nil
}
