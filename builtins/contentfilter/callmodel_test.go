package contentfilter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestChatScansPartsToolResultsAndToolCalls(t *testing.T) {
	call := func(args string) []runtime.Delta {
		return []runtime.Delta{{Text: "ok "}, {ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c", Name: "post", Arguments: args}}}}
	}
	user := []runtime.Message{{Role: "user", Content: "post it"}}
	tests := []struct {
		name    string
		msgs    []runtime.Message
		stream  []runtime.Delta
		blocked string
	}{
		{"text part", []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "the forbidden fruit"}}}},
			call(`{}`), `input contains banned keyword "forbidden fruit"`},
		{"tool result", []runtime.Message{{Role: "user", Content: "look"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "a", Name: "get"}}},
			{Role: "tool", ToolCallID: "a", Content: "ACME-2024 plans"}}, call(`{}`), "tool result contains banned pattern"},
		{"tool call arguments", user, call(`{"text":"about the forbidden fruit"}`), `tool call post arguments contains banned keyword`},
		{"escaped arguments are decoded", user, call(`{"text":"forbidden fr\u0075it"}`), `banned keyword "forbidden fruit"`},
		{"clean", user, call(`{"text":"classy fruit"}`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Stream: tt.stream})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", filterConfig))}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: tt.msgs})
			if tt.blocked == "" {
				require.NoError(t, err)
				require.Len(t, resp.ToolCalls, 1)
				assert.JSONEq(t, `{"text":"classy fruit"}`, string(resp.ToolCalls[0].Arguments))
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Empty(t, resp.ToolCalls)
		})
	}
}
