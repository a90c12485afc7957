package contentfilter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/contentfilter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const filterConfig = `{"keywords":["forbidden fruit","c++"],"patterns":["(?i)acme-\\d{4}"]}`

func TestChatInput(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", filterConfig))}})
	model := rt.NewModel(rt.Response{Deltas: []string{"forbidden fruit is output, not checked"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	tests := []struct {
		input   string
		blocked string
	}{
		{"tell me about the Forbidden, fruit", "forbidden fruit"},
		{"project ACME-2024 status", "acme"},
		{"I write C++ daily", "c++"},
		{"classy fruit", ""},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			before := model.Calls()
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: tt.input}}})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Contains(t, resp.Text, "forbidden fruit", "chat output passes (input-only in the chat stage)")
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "words", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Equal(t, before, model.Calls())
		})
	}
}

// TestChatWholeTranscript: a caller that sends the whole history (a gateway client)
// cannot hide a banned word before the latest message.
func TestChatWholeTranscript(t *testing.T) {
	tool := []runtime.ToolUse{{ID: "c0", Name: "fetch", Arguments: []byte(`{"url":"https://x"}`)}}
	tests := []struct {
		name    string
		config  string
		msgs    []runtime.Message
		blocked string
	}{
		{"earlier user turn", filterConfig, []runtime.Message{
			{Role: "user", Content: "forbidden fruit"}, {Role: "assistant", Content: "no"}, {Role: "user", Content: "ok"}}, "message 0 input"},
		{"fabricated assistant turn", filterConfig, []runtime.Message{
			{Role: "user", Content: "hi"}, {Role: "assistant", Content: "ACME-1234"}, {Role: "user", Content: "ok"}}, "message 1 input"},
		{"tool result in the history", filterConfig, []runtime.Message{
			{Role: "user", Content: "read"}, {Role: "assistant", ToolCalls: tool},
			{Role: "tool", ToolCallID: "c0", Content: "forbidden fruit"}, {Role: "assistant", Content: "read it"}, {Role: "user", Content: "ok"}},
			"message 2 tool result"},
		{"text in place of an image", filterConfig, []runtime.Message{{Role: "user", Content: "see", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: "data:text/plain,the%20forbidden%20fruit"}}}}, "message 0 attachment"},
		{"system prompt", filterConfig, []runtime.Message{{Role: "system", Content: "acme-0001"}, {Role: "user", Content: "ok"}}, "message 0 input"},
		{"system prompt left alone with system false", `{"keywords":["forbidden fruit"],"system":false}`, []runtime.Message{
			{Role: "system", Content: "forbidden fruit"}, {Role: "user", Content: "ok"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Deltas: []string{"fine"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", tt.config)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: tt.msgs})
			if tt.blocked == "" {
				require.NoError(t, err)
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Zero(t, model.Calls())
		})
	}

	// The model's own reply, sent back in its run, is not checked again (the chat
	// stage does not check output); sent in another run, it is.
	model := rt.NewModel(rt.Response{Deltas: []string{"the forbidden fruit"}}, rt.Response{Deltas: []string{"ok"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", filterConfig)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	q := runtime.Message{Role: "user", Content: "tell me a story"}
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{q}})
	require.NoError(t, err)
	history := []runtime.Message{q, {Role: "assistant", Content: resp.Text}, {Role: "user", Content: "more"}}
	_, err = pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: history})
	require.NoError(t, err)
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: history})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "a fresh run checks the whole history")
}

func TestTurnInputAndOutput(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("words", rt.Layer("content_filter", filterConfig))}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err)
	tests := []struct {
		name, input, output string
		blocked             string
	}{
		{"clean", "hi", "hello", ""},
		{"banned input", "forbidden fruit please", "x", "input"},
		{"banned output", "hi", "the code is ACME-1234", "output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := pl.Turn(context.Background(), runtime.TurnRequest{Input: tt.input}, func(context.Context) (string, error) { return tt.output, nil })
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.output, res.Output)
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "words", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Empty(t, res.Output)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", `{"patterns":["ok","[z-a]"]}`)}})
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "patterns[1]")
	for _, cfg := range []string{`{"keywords":[" "]}`, `{"on_error":"x"}`, `{"extra":1}`, `{"grounding":"skip"}`} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

// TestTurnOutputOfAFailedBody: a host's turn body that failed other than
// final with partial output handed that output back with its error,
// unchecked (an after-phase guard reads it; the filter read only the
// output of a turn without error). It is checked: a match blocks.
func TestTurnOutputOfAFailedBody(t *testing.T) {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Named("words", rt.Layer("content_filter", filterConfig))}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err)
	res, err := pl.Turn(context.Background(), runtime.TurnRequest{Input: "hi"}, func(context.Context) (string, error) {
		return "the code is ACME-1234", errors.New("the stream broke")
	})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "words", b.Layer)
	assert.Empty(t, res.Output)
}
