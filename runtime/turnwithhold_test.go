package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestTurnWithholdingAgrees: the text of an agent turn's answers is
// withheld when the turn chain refuses the agent's own turn, and when it
// refuses a turn the agent turn ran in the body of (a scenario's turn
// step around an agent step). Both decide it alike, whatever the turn's
// body returned: an output or an earlier answer refused, a body that
// failed other than final and was refused (the outer turn never read the
// text of a nested agent turn that failed, which its host still got),
// none refused, and a turn that ended final (not read, kept).
func TestTurnWithholdingAgrees(t *testing.T) {
	cases := withholdingCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			deny := `"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")"`
			if !tc.withheld {
				deny = `"deny":"input.text == \"outer\" && output.text.contains(\"never written\")"`
			}
			build := func() (*runtime.Pipeline, runtime.CheckpointStore, context.Context) {
				store := runtime.NewMemoryCheckpoints()
				pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), rt.Layer("guard", `{`+deny+`,"phase":"after"}`)}}),
					runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(tc.responses...)}, Checkpoints: store,
						Tools: map[string]runtime.ToolFunc{
							"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
							"refund": func(context.Context, *runtime.ToolCall) (any, error) {
								return nil, &runtime.InDoubtError{Layer: "bank", Tool: "refund"}
							},
						}})
				return pl, store, runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			}
			// kept reports whether the recorded transcript and the saved
			// version hold the text.
			kept := func(ctx context.Context, pl *runtime.Pipeline, store runtime.CheckpointStore) (recorded, saved bool) {
				cp, ok, err := store.LatestCheckpoint(context.Background(), "r1")
				require.NoError(t, err)
				require.True(t, ok)
				return holds(pl.Transcript(ctx), "acct 1234"), holds(cp.Transcript, "acct 1234")
			}

			pl, store, ctx := build()
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "outer"})
			assert.Equal(t, tc.class, runtime.Classify(err), "own turn: %v", err)
			assert.Equal(t, !tc.withheld, holds(res.Messages, "acct 1234"), "own turn's result")
			recorded, saved := kept(ctx, pl, store)
			assert.Equal(t, !tc.withheld, recorded, "own turn's recorded transcript")
			assert.Equal(t, !tc.withheld, saved, "own turn's checkpoint")

			pl, store, ctx = build()
			tr, err := pl.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
				res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "inner"})
				return res.Output, err
			})
			assert.Equal(t, tc.class, runtime.Classify(err), "outer turn: %v", err)
			assert.Equal(t, tc.withheld, tr.Withheld, "outer turn's result says what its host withholds")
			recorded, saved = kept(ctx, pl, store)
			assert.Equal(t, !tc.withheld, recorded, "outer turn's recorded transcript")
			assert.Equal(t, !tc.withheld, saved, "outer turn's checkpoint")
		})
	}
}

// holds reports whether a message of msgs holds text.
func holds(msgs []runtime.Message, text string) bool {
	for _, m := range msgs {
		if strings.Contains(m.Text(), text) {
			return true
		}
	}
	return false
}

// TestNestedAgentTurnOfAFailedOuterBody: an agent turn that returned in
// the body of a turn that then failed (a later step of a scenario's turn
// step) handed the outer turn chain its text, which refused it; the run's
// recorded transcript and the checkpoint saved after the outer turn kept
// it, since only the refusal of a body that returned withheld anything.
func TestNestedAgentTurnOfAFailedOuterBody(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`),
		rt.Layer("guard", `{"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")","phase":"after"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"your acct 1234 is open"}})}, Checkpoints: store})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	tr, err := pl.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "inner"})
		require.NoError(t, err)
		require.Equal(t, "your acct 1234 is open", res.Output, "the inner chain let it through")
		return "", errors.New("the next step failed")
	})
	require.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
	assert.True(t, tr.Withheld)
	assertNotRecorded(t, ctx, pl, store, "acct 1234")
}

// TestRequireOfTheFinalAnswer: an after-phase guard's require holds for
// the text of each earlier answer of the turn too; output.final scopes it
// to the turn's output, which it still checks.
func TestRequireOfTheFinalAnswer(t *testing.T) {
	calling := rt.Response{Stream: []runtime.Delta{{Text: "let me check", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "echo", Arguments: `{}`}}}}}
	for _, tc := range []struct {
		require, answer string
		class           runtime.Class
	}{
		{"output.text.startsWith('Answer:')", "Answer: 42", runtime.ClassBlocked},
		{"!output.final || output.text.startsWith('Answer:')", "Answer: 42", runtime.ClassOK},
		{"!output.final || output.text.startsWith('Answer:')", "42", runtime.ClassBlocked},
	} {
		t.Run(tc.require+" "+tc.answer, func(t *testing.T) {
			guard := rt.Layer("guard", `{"require":"`+strings.ReplaceAll(tc.require, `'`, `\"`)+`","phase":"after"}`)
			pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{guard}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(calling, rt.Response{Deltas: []string{tc.answer}})},
					Tools: map[string]runtime.ToolFunc{"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "what is it?"})
			require.Equal(t, tc.class, runtime.Classify(err), "%v", err)
			if tc.class == runtime.ClassOK {
				assert.Equal(t, tc.answer, res.Output)
				assert.True(t, holds(res.Messages, "let me check"), "the earlier text let through")
			} else {
				assert.False(t, holds(res.Messages, tc.answer))
			}
		})
	}
}

// withholdingCase is a body of an agent turn the turn chain judges: the
// model's answers, the class the outer turn ends in, and whether the
// agent's text is withheld.
type withholdingCase struct {
	name      string
	responses []rt.Response
	class     runtime.Class
	withheld  bool
}

// withholdingCases are the bodies TestTurnWithholdingAgrees and
// TestTurnWithholdingAgreesNestedDeeper run: an output or an earlier
// answer refused, a body that failed and was refused, none refused, and
// a turn that ended final.
func withholdingCases() []withholdingCase {
	calling := func(tool string) rt.Response {
		return rt.Response{Stream: []runtime.Delta{{Text: "acct 1234: checking", FinishReason: runtime.FinishToolCalls,
			ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: tool, Arguments: `{}`}}}}}
	}
	return []withholdingCase{
		{"output refused", []rt.Response{{Deltas: []string{"your acct 1234 is open"}}}, runtime.ClassBlocked, true},
		{"earlier answer refused", []rt.Response{calling("echo"), {Deltas: []string{"all fine"}}}, runtime.ClassBlocked, true},
		{"failed, then refused", []rt.Response{calling("echo"), {Err: errors.New("upstream down")}}, runtime.ClassBlocked, true},
		{"let through", []rt.Response{calling("echo"), {Deltas: []string{"all fine"}}}, runtime.ClassOK, false},
		{"ended final", []rt.Response{calling("refund")}, runtime.ClassInDoubt, false},
	}
}
