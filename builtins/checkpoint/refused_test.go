package checkpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/contentfilter"
	_ "github.com/agentc-dev/agentc/builtins/guard"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRefusedOutputIsNotSaved: a turn whose output a layer of the turn
// chain refuses (a content_filter, an after-phase guard) is saved without
// the refused text and as failed, wherever the checkpoint layer stands in
// the chain: a checkpoint inside the refusing layer saved the text, as a
// running run, before the refusal, and a resume handed it back to the host
// and the model.
func TestRefusedOutputIsNotSaved(t *testing.T) {
	filter := rt.Layer("content_filter", `{"keywords":["acct 1234"]}`)
	guard := rt.Layer("guard", `{"deny":"output.text.contains(\"acct 1234\")","phase":"after"}`)
	cases := map[string][]plan.Layer{
		"checkpoint outside the filter":           {rt.Layer("checkpoint", `{}`), filter},
		"checkpoint inside the filter":            {filter, rt.Layer("checkpoint", `{}`)},
		"checkpoint with after_tool inside":       {filter, rt.Layer("checkpoint", `{"after_tool": true}`)},
		"checkpoint inside an after-phase guard":  {guard, rt.Layer("checkpoint", `{}`)},
		"checkpoint outside an after-phase guard": {rt.Layer("checkpoint", `{}`), guard},
	}
	for name, chain := range cases {
		t.Run(name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			model := rt.NewModel(
				rt.Response{Stream: []runtime.Delta{{Text: "checking", FinishReason: runtime.FinishToolCalls,
					ToolCalls: []runtime.ToolCallDelta{{ID: "c1", Name: "lookup", Arguments: `{}`}}}}},
				rt.Response{Deltas: []string{"your acct 1234 is open"}})
			p := rt.Plan(plan.Chains{Turn: chain})
			p.Tools = map[string]plan.Tool{"lookup": {}}
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
				Tools: map[string]runtime.ToolFunc{"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return "open", nil }}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "refused"})
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "status?"})
			require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
			require.Len(t, res.Messages, 3, "the input, the call and its result")

			cp, ok, err := store.LatestCheckpoint(ctx, "refused")
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, runtime.RunFailed, cp.Status, "a refused turn ends its run, as a refusal outside the checkpoint does")
			assert.Equal(t, res.Messages, cp.Transcript, "the version holds the transcript the turn returned")
			for _, m := range cp.Transcript {
				assert.NotContains(t, m.Text(), "acct 1234")
			}
		})
	}
}
