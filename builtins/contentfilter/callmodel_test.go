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

// TestChatToolCallNumbersReadInPlainForm: a number in a tool call's arguments was read as
// written, so an account a pattern bans passed written with an exponent or a fraction
// (4.111111111111111e15, 9.99123456E8), which the tool chain runs as the integer it is.
// Each number is read in plain decimal form too, as tool_policy's arg_patterns read it.
func TestChatToolCallNumbersReadInPlainForm(t *testing.T) {
	const config = `{"keywords":["4111111111111111"],"patterns":["\\b999\\d{6}\\b", "(?m)^0\\.0000001$"]}`
	call := func(args string) []runtime.Delta {
		return []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c", Name: "pay", Arguments: args}}}}
	}
	user := []runtime.Message{{Role: "user", Content: "pay"}}
	for _, tc := range []struct {
		args    string
		blocked string
	}{
		{`{"acct": 4.111111111111111e15}`, `banned keyword "4111111111111111"`},
		{`{"acct": 41111111111111.11e2}`, `banned keyword "4111111111111111"`},
		{`{"ids": [1, {"to": 9.99123456E8}]}`, "banned pattern"},
		{`{"rate": 1e-7}`, "banned pattern"},
		{`{"acct": 4111111111111112, "n": 1e3}`, ""},
	} {
		t.Run(tc.args, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Stream: call(tc.args)})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", config))}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: user})
			if tc.blocked == "" {
				require.NoError(t, err)
				require.Len(t, resp.ToolCalls, 1)
				assert.JSONEq(t, tc.args, string(resp.ToolCalls[0].Arguments), "the call goes out as written")
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, tc.blocked)
			assert.Empty(t, resp.ToolCalls)

			// The same call in the transcript sent back is read so too.
			hist := []runtime.Message{{Role: "user", Content: "pay"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{
				{ID: "c", Name: "pay", Arguments: []byte(tc.args)}}}, {Role: "tool", ToolCallID: "c", Content: "done"}}
			model = rt.NewModel(rt.Response{Deltas: []string{"ok"}})
			pl = rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", config))}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hist})
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "message 1 tool call arguments")
		})
	}
}
