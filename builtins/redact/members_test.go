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

// TestSecretAcrossKeyAndValue: a secret whose start is written in an object's key and its rest
// in the key's value (`{"password=hunter": "22xyz"}`, a key cut in two over a key and its
// value), and a secret under a key word nested one level in an object or an array
// (`{"password": {"value": "hunter22x"}}`), are masked in the value as in the key, in a tool
// message holding the JSON, in a tool's result and in a tool call's arguments; other keys and
// values are kept.
func TestSecretAcrossKeyAndValue(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"assignment cut in the value", `{"password=hunter": "22xyz", "user": "bob"}`,
			`{"password=[REDACTED:password-assignment]": "[REDACTED:password-assignment]", "user": "bob"}`},
		{"assignment cut in a word", `{"password=hun": "ter22xyz"}`,
			`{"password=[REDACTED:password-assignment]": "[REDACTED:password-assignment]"}`},
		{"key cut in two", `{"sk-proj-AbCdEfGh": "IjKlMnOpQrStUvWx0123", "n": "x"}`,
			`{"[REDACTED:openai-key]": "[REDACTED:openai-key]", "n": "x"}`},
		{"value nested in an object", `{"password": {"value": "hunter22x"}, "user": "bob"}`,
			`{"password": {"value": "[REDACTED:password-assignment]"}, "user": "bob"}`},
		{"values nested in an object", `{"api_key": {"old": "Zq81mNb0Xc7", "new": "Yp72lMa9Wb6", "n": 3}}`,
			`{"api_key": {"old": "[REDACTED:password-assignment]", "new": "[REDACTED:password-assignment]", "n": 3}}`},
		{"value nested in an array", `{"password": ["hunter22x"]}`, `{"password": ["[REDACTED:password-assignment]"]}`},
		{"deeper values are no key's", `{"password": {"policy": {"hint": "pet"}}, "user": {"value": "bob"}}`,
			`{"password": {"policy": {"hint": "pet"}}, "user": {"value": "bob"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertJSONMasked(t, tt.in, tt.want)
			_, calls := streamThrough(t, []runtime.Delta{
				{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: tt.in}}},
				{FinishReason: runtime.FinishToolCalls}})
			assert.JSONEq(t, tt.want, calls, "tool call the model makes")
		})
	}
}

// TestSecretAfterALabelCutOverElements: a key that starts an element after a label of its own
// and is cut over the elements after it is masked: read run together, the label glued to its
// start, and as lines, no element holds it.
func TestSecretAfterALabelCutOverElements(t *testing.T) {
	for _, in := range []string{
		`["id", "sk-proj-Ab", "CdEf0hIjKl", "MnOpQrStUvWx"]`,
		`["user_id", "sk-proj-Ab", "CdEf0hIjKl", "MnOpQrStUvWx"]`,
		`{"a": "api_key", "b": "sk-proj-Ab", "c": "CdEf0hIjKl", "d": "MnOpQrStUvWx"}`,
		`{"a": "key", "b": "sk-proj-Ab", "c": "CdEf0hIjKl", "d": "MnOpQrStUvWx"}`,
		`["x", "aws_s", "ecret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]`,
	} {
		t.Run(in, func(t *testing.T) {
			got := sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: in}})
			assert.Contains(t, got[0].Content, "[REDACTED:")
			assert.NotContains(t, got[0].Content, "CdEf0hIjKl")
			assert.NotContains(t, got[0].Content, "EXAMPLEKEY")
			var v any
			require.NoError(t, json.Unmarshal([]byte(in), &v))
			res := toolResultThrough(t, v)
			assert.Contains(t, res, "[REDACTED:")
			assert.NotContains(t, res, "MnOpQrStUvWx")
			assert.NotContains(t, res, "EXAMPLEKEY")
		})
	}
}

// TestSecretInNameValuePair: an object that names a value in a member of its own, as a list of
// environment variables, a form's fields or a header list writes them (`{"name": "API_KEY",
// "value": "hunter22x"}`), has its value read after its name, as the member it stands for, and
// masked; a pair whose name is no key word is kept.
func TestSecretInNameValuePair(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"environment", `{"env": [{"name": "API_KEY", "value": "hunter22x"}, {"name": "DB_HOST", "value": "db.internal"}]}`,
			`{"env": [{"name": "API_KEY", "value": "[REDACTED:password-assignment]"}, {"name": "DB_HOST", "value": "db.internal"}]}`},
		{"form fields", `[{"name": "user", "value": "bob"}, {"name": "api_key", "value": "Zq81mNb0Xc7"}]`,
			`[{"name": "user", "value": "bob"}, {"name": "api_key", "value": "[REDACTED:password-assignment]"}]`},
		{"key and value, out of order", `{"Value": "Zq81mNb0Xc7", "Key": "token"}`, `{"Value": "[REDACTED:password-assignment]", "Key": "token"}`},
	} {
		t.Run(tt.name, func(t *testing.T) { assertJSONMasked(t, tt.in, tt.want) })
	}
}

// assertJSONMasked checks that the JSON document in reaches the model as want in a tool message
// and as the arguments of a tool call sent back, and a tool's result decoded from it as want.
func assertJSONMasked(t *testing.T, in, want string) {
	t.Helper()
	got := sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: in},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(in)}}}})
	assert.JSONEq(t, want, got[0].Content, "tool message")
	assert.JSONEq(t, want, string(got[1].ToolCalls[0].Arguments), "tool call sent back")
	var v any
	require.NoError(t, json.Unmarshal([]byte(in), &v))
	assert.JSONEq(t, want, toolResultThrough(t, v), "tool result")
}
