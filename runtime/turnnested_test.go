package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestTurnWithholdingAgreesNestedDeeper: TestTurnWithholdingAgrees with
// the agent turn two and three turns down from the one the chain refuses,
// and with another pipeline's turn of the same run between them. An agent
// turn in a Pipeline.Turn nested in the host's turn handed its answers to
// the nearest turn only: the outermost turn's chain never read them, and
// its refusal withheld nothing, so the run's recorded transcript and the
// checkpoint saved after it kept the refused text. Across another
// pipeline's turn, the agent turn was refused outright (ErrRunBusy): its
// pipeline looked only at the innermost turn, the other pipeline's. A
// nested turn that its own chain lets through hands what its body's agent
// turns wrote to the turn it is nested in, which judges it as if they ran
// in its own body; the run is saved once, as the outermost turn ends.
func TestTurnWithholdingAgreesNestedDeeper(t *testing.T) {
	cases := withholdingCases()
	// A shape runs the agent turn in turns nested in pl's turn "outer";
	// other is another pipeline.
	type shape func(ctx context.Context, pl, other *runtime.Pipeline) (runtime.TurnResult, error)
	nest := func(pl *runtime.Pipeline, body runtime.TurnFunc) runtime.TurnFunc {
		return func(ctx context.Context) (string, error) {
			tr, err := pl.Turn(ctx, runtime.TurnRequest{Input: "middle"}, body)
			return tr.Output, err
		}
	}
	agent := func(pl *runtime.Pipeline) runtime.TurnFunc {
		return func(ctx context.Context) (string, error) {
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "inner"})
			return res.Output, err
		}
	}
	outer := func(ctx context.Context, pl *runtime.Pipeline, body runtime.TurnFunc) (runtime.TurnResult, error) {
		return pl.Turn(ctx, runtime.TurnRequest{Input: "outer"}, body)
	}
	shapes := map[string]shape{
		"two levels": func(ctx context.Context, pl, _ *runtime.Pipeline) (runtime.TurnResult, error) {
			return outer(ctx, pl, nest(pl, agent(pl)))
		},
		"three levels": func(ctx context.Context, pl, _ *runtime.Pipeline) (runtime.TurnResult, error) {
			return outer(ctx, pl, nest(pl, nest(pl, agent(pl))))
		},
		"in another pipeline's turn": func(ctx context.Context, pl, other *runtime.Pipeline) (runtime.TurnResult, error) {
			return outer(ctx, pl, nest(other, agent(pl)))
		},
		"in a turn in another pipeline's turn": func(ctx context.Context, pl, other *runtime.Pipeline) (runtime.TurnResult, error) {
			return outer(ctx, pl, nest(other, nest(pl, agent(pl))))
		},
	}
	for _, tc := range cases {
		for name, run := range shapes {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				deny := `"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")"`
				if !tc.withheld {
					deny = `"deny":"input.text == \"outer\" && output.text.contains(\"never written\")"`
				}
				store := runtime.NewMemoryCheckpoints()
				pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), rt.Layer("guard", `{`+deny+`,"phase":"after"}`)}}),
					runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(tc.responses...)}, Checkpoints: store,
						Tools: map[string]runtime.ToolFunc{
							"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
							"refund": func(context.Context, *runtime.ToolCall) (any, error) {
								return nil, &runtime.InDoubtError{Layer: "bank", Tool: "refund"}
							},
						}})
				other := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}),
					runtime.Deps{Checkpoints: runtime.NewMemoryCheckpoints()})
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

				tr, err := run(ctx, pl, other)
				assert.NotErrorIs(t, err, runtime.ErrRunBusy)
				assert.Equal(t, tc.class, runtime.Classify(err), "%v", err)
				assert.Equal(t, tc.withheld, tr.Withheld, "the outermost turn's result says what its host withholds")
				assert.Equal(t, !tc.withheld, holds(pl.Transcript(ctx), "acct 1234"), "the recorded transcript")
				cp, ok, err := store.LatestCheckpoint(context.Background(), "r1")
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, !tc.withheld, holds(cp.Transcript, "acct 1234"), "the checkpoint")
				assert.Equal(t, 1, cp.Version, "one save, as the outermost turn ended")
			})
		}
	}
}

// TestAgentTurnBackThroughAnotherPipeline: an agent turn whose tool runs
// another pipeline's agent turn of the same run, whose tool in turn runs
// an agent turn of the first pipeline, had that last one refused
// (ErrRunBusy): its pipeline looked only at the innermost turn, the other
// pipeline's, and took the run as held by a turn it was not part of. It
// is part of the first pipeline's agent turn whose tool call it runs in:
// it runs, records neither the run's transcript nor the calls it makes,
// and its tool results are recorded under the outer call's name.
func TestAgentTurnBackThroughAnotherPipeline(t *testing.T) {
	var first, second *runtime.Pipeline
	model, tools := delegating(&second)
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}})
	p.Tools = map[string]plan.Tool{"delegate": {}, "lookup": {}}
	store := runtime.NewMemoryCheckpoints()
	first = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: store})
	back := map[string]runtime.ToolFunc{"lookup": func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		res, err := first.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "back"})
		assert.NoError(t, err, "the first pipeline's agent turn, in its own turn's tool call")
		assert.Equal(t, "back found", res.Output)
		return res.Output, err
	}}
	// The second pipeline records no run: its two agent turns, one per
	// delegate call, run at once.
	q := rt.Plan(plan.Chains{})
	q.Tools = p.Tools
	second = rt.Build(t, q, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: back})

	res, ctx := planTrip(t, first, "trip")
	assert.Equal(t, []string{"call_1=flights found", "call_2=hotels found"}, answers(res.Messages))
	assert.Equal(t, "plan the trip", first.Transcript(ctx)[0].Text(), "the run's transcript is the outer turn's")
	cp, _, err := store.LatestCheckpoint(context.Background(), "trip")
	require.NoError(t, err)
	var outerCalls []string
	for _, r := range cp.Tools {
		if r.Tool == "delegate" {
			outerCalls = append(outerCalls, r.Call)
		}
	}
	require.Len(t, outerCalls, 2)
	var lookups int
	for _, r := range cp.Tools {
		if r.Tool != "lookup" {
			continue
		}
		lookups++
		outerCall, _, ok := strings.Cut(r.Call, "/")
		assert.True(t, ok, "a nested call's record %q is named apart", r.Call)
		assert.Contains(t, outerCalls, outerCall, "under the first pipeline's outer call")
	}
	assert.Equal(t, 2, lookups, "one lookup of each agent turn run back in the first pipeline")
}

// TestAgentTurnOfAHostTurnThroughAnotherPipeline: an agent turn run by
// the tool of another pipeline's agent turn, itself run in the body of a
// host's turn of the first pipeline and the same run, was refused
// (ErrRunBusy). It is an agent turn of the host's turn, not of the other
// pipeline's agent turn's call: it records the run's transcript, and the
// host's turn chain reads its answers and withholds them when it refuses
// the turn.
func TestAgentTurnOfAHostTurnThroughAnotherPipeline(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprint("refused=", refused), func(t *testing.T) {
			deny := `"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")"`
			if !refused {
				deny = `"deny":"input.text == \"outer\" && output.text.contains(\"never written\")"`
			}
			store := runtime.NewMemoryCheckpoints()
			host := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), rt.Layer("guard", `{`+deny+`,"phase":"after"}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"your acct 1234 is open"}})}, Checkpoints: store})
			calling := runtime.Delta{FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "ask", Arguments: `{}`}}}
			other := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Stream: []runtime.Delta{calling}}, rt.Response{Deltas: []string{"asked"}})},
					Checkpoints: runtime.NewMemoryCheckpoints(),
					Tools: map[string]runtime.ToolFunc{"ask": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
						res, err := host.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "inner"})
						assert.NoError(t, err, "an agent turn of the host's turn")
						return res.Output, err
					}}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			tr, err := host.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
				res, err := other.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "ask the host"})
				return res.Output, err
			})
			assert.Equal(t, refused, tr.Withheld)
			if refused {
				assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
				assertNotRecorded(t, ctx, host, store, "acct 1234")
				return
			}
			require.NoError(t, err)
			assert.True(t, holds(host.Transcript(ctx), "your acct 1234 is open"), "the agent turn recorded the run's transcript")
		})
	}
}
