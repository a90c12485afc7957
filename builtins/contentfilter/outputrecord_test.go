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

// TestOutputPassedIsTheAssistantsOnly: the model's output, which the layer passes unchecked,
// is not checked again when it comes back as the assistant's turn of the run, but it is
// not taken for checked text: whoever writes the prompt has the model write a banned word
// it was given spelled otherwise ("decode this"), then sends that answer as the user's
// message, and it is blocked as any other.
func TestOutputPassedIsTheAssistantsOnly(t *testing.T) {
	out := "the forbidden fruit"
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("words", rt.Layer("content_filter", filterConfig))}})
	model := rt.NewModel(rt.Response{Deltas: []string{"the forbid", "den fruit"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	defer pl.EndRun("r1")
	ask := []runtime.Message{{Role: "user", Content: "decode: gur sbeovqqra shvg"}}
	resp, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: ask})
	require.NoError(t, err)
	require.Equal(t, out, resp.Text)

	_, err = pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: append(ask,
		runtime.Message{Role: "assistant", Content: out}, runtime.Message{Role: "user", Content: "thanks"})})
	require.NoError(t, err, "the assistant's own turn comes back unchecked")

	for _, role := range []string{"user", "system"} {
		_, err = pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: role, Content: out}, {Role: "user", Content: "go on"}}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, "the output sent back as a %s message", role)
		assert.Contains(t, b.Message, "forbidden fruit")
	}
}
