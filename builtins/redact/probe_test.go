package redact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// probeSecrets are the secrets the probes try to get through, each in a line of text.
var probeSecrets = map[string]string{
	"aws key":      "AKIA" + "IOSFODNN7EXAMPLE",
	"github token": "ghp" + "_" + strings.Repeat("a1B2c", 8)[:36],
	"openai key":   "sk-" + "proj-" + strings.Repeat("Ab3dE", 8),
	"private key":  "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7abcdefghijkl\n-----END RSA PRIVATE KEY-----",
	"password":     "password=Hunter22!x",
}

// probeSpellings are the spellings the probes write a value in.
var probeSpellings = textnormtest.Encodings()

// probePositions run a text through a redact layer in one place a secret can reach the
// model or the caller, and return what got through.
var probePositions = map[string]func(t *testing.T, text string) string{
	"user message": func(t *testing.T, text string) string {
		return sendThrough(t, []runtime.Message{{Role: "user", Content: "here: " + text + " ok"}})[0].Content
	},
	"tool message": func(t *testing.T, text string) string {
		return sendThrough(t, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: text}})[0].Content
	},
	"tool call arguments sent back": func(t *testing.T, text string) string {
		args, err := json.Marshal(map[string]any{"q": text, "lines": []string{"x", text}})
		require.NoError(t, err)
		got := sendThrough(t, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}})
		return string(got[0].ToolCalls[0].Arguments)
	},
	"tool result": func(t *testing.T, text string) string {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("redact", "")}})
		tool := rt.NewTool(rt.ToolResult{Value: map[string]any{"body": text, "n": 1.0}})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
		require.NoError(t, err)
		res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
		require.NoError(t, err)
		return fmt.Sprint(res.Value)
	},
	"model output": func(t *testing.T, text string) string {
		out, _ := streamThrough(t, []runtime.Delta{{Text: "sure:\n" + text[:len(text)/2]}, {Text: text[len(text)/2:] + "\ndone"}})
		return out
	},
	"model tool call": func(t *testing.T, text string) string {
		args, err := json.Marshal(map[string]string{"body": text})
		require.NoError(t, err)
		a := string(args)
		_, calls := streamThrough(t, []runtime.Delta{
			{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: a[:len(a)/2]}}},
			{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: a[len(a)/2:]}}},
			{FinishReason: runtime.FinishToolCalls}})
		return calls
	},
}

// streamThrough streams deltas from a model through a redact layer and returns the text and
// the tool calls' arguments that got through.
func streamThrough(t *testing.T, deltas []runtime.Delta) (string, string) {
	t.Helper()
	model := rt.NewModel(rt.Response{Stream: deltas})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var text strings.Builder
	var calls runtime.ToolCallBuilder
	_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		text.WriteString(d.Text)
		calls.Add(&d)
		return true
	})
	require.NoError(t, err)
	var args strings.Builder
	for _, c := range calls.ToolCalls() {
		args.Write(c.Arguments)
	}
	return text.String(), args.String()
}

// TestProbeSecretsDoNotGetThrough tries every secret, in every spelling, in every position a
// redact layer guards: neither the secret nor its encoding gets through, and a placeholder
// stands in their place.
func TestProbeSecretsDoNotGetThrough(t *testing.T) {
	for sname, secret := range probeSecrets {
		for wname, spell := range probeSpellings {
			written := spell(secret)
			for pname, through := range probePositions {
				t.Run(sname+"/"+wname+"/"+pname, func(t *testing.T) {
					got := through(t, written)
					assert.NotContains(t, got, written)
					for _, line := range strings.Split(secret, "\n") {
						assert.NotContains(t, got, line[:min(len(line), 16)])
					}
					if wname != "plain" {
						assert.NotContains(t, got, written[len(written)-12:], "no piece of the encoding is left")
					}
					assert.Contains(t, got, "[REDACTED:")
				})
			}
		}
	}
}
