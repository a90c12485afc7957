package pii_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A card written as a JSON number, as a tool's arguments and results carry
// one ({"card": 4111111111111111}), is found wherever the model reads or a
// tool receives it: "block" refuses it, "redact" masks it, the number
// becoming its masked string (a number cannot hold a mask). An id of as
// many digits that is no card (fails Luhn, or no card's IIN) is left a
// number.
func TestCardAsJSONNumber(t *testing.T) {
	const card, id = `{"card":4111111111111111,"order":4111111111111112}`, `{"order":4111111111111112}`
	t.Run("tool arguments", func(t *testing.T) {
		var seen map[string]any
		fn := func(_ context.Context, c *runtime.ToolCall) (any, error) { seen = c.Args; return "done", nil }
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(card), &args))
		_, err := toolPipeline(t, `{"action":"block"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		assert.Contains(t, b.Message, "/card")
		_, err = toolPipeline(t, `{"action":"redact"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		require.NoError(t, err)
		assert.Equal(t, "[REDACTED:card]", seen["card"])
		assert.Equal(t, json.Number("4111111111111112"), toNumber(seen["order"]), "no card: left a number")
	})
	t.Run("tool result", func(t *testing.T) {
		fn := func(context.Context, *runtime.ToolCall) (any, error) { return json.RawMessage(card), nil }
		_, err := toolPipeline(t, `{"action":"block"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		res, err := toolPipeline(t, `{"action":"redact"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
		require.NoError(t, err)
		out, err := json.Marshal(res.Value)
		require.NoError(t, err)
		assert.JSONEq(t, `{"card":"[REDACTED:card]","order":4111111111111112}`, string(out))
	})
	t.Run("tool result and arguments in the transcript", func(t *testing.T) {
		msgs := func(args, result string) []runtime.Message {
			return []runtime.Message{{Role: "user", Content: "pay"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "pay", Arguments: []byte(args)}}},
				{Role: "tool", ToolCallID: "c0", Content: result}}
		}
		for _, m := range [][]runtime.Message{msgs(card, "ok"), msgs(`{}`, card)} {
			model := rt.NewModel(rt.Response{Deltas: []string{"fine"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("pii", `{"action":"block"}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: m})
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "(card)")
		}
		for _, m := range [][]runtime.Message{msgs(id, "ok"), msgs(`{}`, id)} {
			model := rt.NewModel(rt.Response{Deltas: []string{"fine"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("pii", `{"action":"block"}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: m})
			require.NoError(t, err)
		}
	})
}

func toNumber(v any) json.Number {
	b, _ := json.Marshal(v)
	return json.Number(b)
}
