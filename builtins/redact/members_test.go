package redact_test

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

// TestSecretUnderItsKey: the value of an object key that names a secret ("password",
// "api_key", "aws_secret_access_key") is read with its key, as the model reads the member
// (`"password": "hunter22x"`), and masked, in a tool's result, in the arguments of a tool call
// sent back and in those the model makes; the key, a value under another key and a value
// under a key word that is no secret are kept.
func TestSecretUnderItsKey(t *testing.T) {
	value := map[string]any{
		"password": "hunter22x",
		"user":     "bob",
		"db":       map[string]any{"api_key": "Zq81mNb0Xc7", "host": "db.internal", "pin": json.Number("12345678")},
		"aws":      map[string]string{"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"},
		"passport": "X1234567",
	}
	want := `{"password": "[REDACTED:password-assignment]", "user": "bob",
		"db": {"api_key": "[REDACTED:password-assignment]", "host": "db.internal", "pin": 12345678},
		"aws": {"aws_secret_access_key": "[REDACTED:aws-secret-access-key]"}, "passport": "X1234567"}`
	args, err := json.Marshal(value)
	require.NoError(t, err)

	assert.JSONEq(t, want, toolResultThrough(t, value), "tool result")

	sent := sendThrough(t, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}})
	assert.JSONEq(t, want, string(sent[0].ToolCalls[0].Arguments), "tool call sent back")

	_, calls := streamThrough(t, []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: string(args)}}},
		{FinishReason: runtime.FinishToolCalls}})
	assert.JSONEq(t, want, calls, "tool call the model makes")
}

// toolResultThrough returns, as JSON, the result of a tool returning v through a redact layer.
func toolResultThrough(t *testing.T, v any) string {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("redact", "")}})
	tool := rt.NewTool(rt.ToolResult{Value: v})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	got, err := json.Marshal(res.Value)
	require.NoError(t, err)
	return string(got)
}

// TestKeyWordAsStringOfItsOwn: a key word and its value written as strings of their own, in a
// JSON array or object as a tool message holds it (["password=", "hunter22x"], ["password",
// "=hunter22x"], {"password=": "hunter22x"}), are read as the assignment the model reads, in
// the text of a tool message and in a tool's result; a key word with no value after it, and
// words in a list, are kept.
func TestKeyWordAsStringOfItsOwn(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"value after its key word", `["user: bob","password=","hunter22x"]`, `["user: bob","password=","[REDACTED:password-assignment]"]`},
		{"layout kept with nothing cut across strings", `{"a": "x", "b": "password: hunter22x"}`, `{"a": "x", "b": "password: [REDACTED:password-assignment]"}`},
		{"sign with the value", `["xyz","password","=hunter22x"]`, `["xyz","password","=[REDACTED:password-assignment]"]`},
		{"key holding the sign", `{"password=":"hunter22x"}`, `{"password=":"[REDACTED:password-assignment]"}`},
		{"key word in a list", `["password","token","user"]`, `["password","token","user"]`},
		{"no value", `{"password":"","user":"bob"}`, `{"password":"","user":"bob"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: tt.in}})
			assert.Equal(t, tt.want, got[0].Content, "tool message")
			var v any
			require.NoError(t, json.Unmarshal([]byte(tt.in), &v))
			var want any
			require.NoError(t, json.Unmarshal([]byte(tt.want), &want))
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			assert.JSONEq(t, string(wantJSON), toolResultThrough(t, v), "tool result")
		})
	}
}
