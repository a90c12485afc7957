package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/fallback"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestAnAnswerIsBoundedByMaxAnswerBytes: Complete, and every layer that
// holds an answer whole, took whatever the model streamed. A stream past
// settings.max_answer_bytes (text, thinking, tool-call arguments summed)
// fails as the upstream's permanent failure once the bound is passed: the
// client is told to stop, what arrived is charged, and the answer held is
// at most the bound.
func TestAnAnswerIsBoundedByMaxAnswerBytes(t *testing.T) {
	const bound = 4096
	piece := strings.Repeat("a", 1000)
	text := make([]string, 100)
	for i := range text {
		text[i] = piece
	}
	args := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "t", Arguments: `{"x":"`}}}}
	for range 100 {
		args = append(args, runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: piece}}})
	}
	for name, r := range map[string]rt.Response{
		"text":      {Deltas: text},
		"tool call": {Stream: args},
		"thinking":  {Stream: []runtime.Delta{{Thinking: &runtime.ThinkingDelta{Text: piece}}, {Thinking: &runtime.ThinkingDelta{Text: piece}}, {Text: piece}, {Text: piece}, {Text: piece}}},
		// The first delta alone is past the bound: nothing was delivered, so
		// only the failure's kind keeps a retry and a fallback from trying
		// again; the refused delta arrived and is charged all the same.
		"first delta": {Deltas: []string{strings.Repeat("a", 5000)}},
	} {
		t.Run(name, func(t *testing.T) {
			m := rt.NewModel(r)
			backup := rt.NewModel(rt.Response{Deltas: []string{"short"}})
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{
				rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
				rt.Layer("fallback", `{"models":["primary","backup"]}`)}})
			p.Settings.MaxAnswerBytes = bound
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m, "backup": backup}})
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
			require.Error(t, err)
			assert.Equal(t, "permanent", runtime.KindOf(err))
			assert.Contains(t, err.Error(), "4096-byte limit (settings.max_answer_bytes)")
			held := len(resp.Text)
			for _, c := range resp.ToolCalls {
				held += len(c.Arguments)
			}
			for _, b := range resp.Thinking {
				held += len(b.Text)
			}
			assert.LessOrEqual(t, held, bound)
			assert.Equal(t, 1, m.Calls(), "not retried: another attempt would bring as much")
			assert.Zero(t, backup.Calls(), "no fallback: the bound is the plan's, not the model's")
			assert.Positive(t, resp.Usage.OutputTokens, "what arrived is charged")
		})
	}

	// Within the bound, the answer is whole.
	m := rt.NewModel(rt.Response{Deltas: text[:4]})
	p := rt.Plan(plan.Chains{})
	p.Settings.MaxAnswerBytes = bound
	resp, err := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}}).
		Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Len(t, resp.Text, 4000)
}

// TestRepeatedToolCallIDsAreCountedOnce: some OpenAI-compatible servers
// repeat a call's id and name on each of its fragments; the bound counted
// them on every one, so an answer well within it was refused.
func TestRepeatedToolCallIDsAreCountedOnce(t *testing.T) {
	var stream []runtime.Delta
	args := `{"x":"` + strings.Repeat("a", 2990) + `"}`
	for i := 0; i < len(args); i += 30 {
		stream = append(stream, runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{
			Index: 0, ID: "call_abcdefgh", Name: "lookup_something", Arguments: args[i:min(i+30, len(args))]}}})
	}
	m := rt.NewModel(rt.Response{Stream: stream})
	p := rt.Plan(plan.Chains{})
	p.Settings.MaxAnswerBytes = 4096
	resp, err := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}}).
		Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	require.Len(t, resp.ToolCalls, 1)
	assert.Equal(t, args, string(resp.ToolCalls[0].Arguments))
	assert.Equal(t, "lookup_something", resp.ToolCalls[0].Name)
}
