package contentfilter_test

import (
	"context"
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
	for _, cfg := range []string{`{"keywords":[" "]}`, `{"on_error":"x"}`, `{"extra":1}`} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("content_filter", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}
