package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// firstHeld builds a pipeline recording its runs (a checkpoint) whose
// model answers each input ("answer to first"), holding its answer to
// "first" until release is closed; started is closed once it is asked.
func firstHeld(t *testing.T) (pl *runtime.Pipeline, started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		input := req.Messages[len(req.Messages)-1].Text()
		if input == "first" {
			close(started)
			<-release
		}
		yield(runtime.Delta{Text: "answer to " + input})
		return nil
	})
	pl = rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: runtime.NewMemoryCheckpoints()})
	return pl, started, release
}

// TestConcurrentAgentTurnsAcrossNestedTurns: a host's turn body that ran
// an agent turn of its run while another ran in a turn nested in the body
// (Pipeline.Turn there) had each held a different turn, so neither was
// refused and each recorded its transcript as the run's over the other's.
// A nested turn is part of the outer one: the second agent turn is refused
// (ErrRunBusy), whichever of the two runs in the nested turn.
func TestConcurrentAgentTurnsAcrossNestedTurns(t *testing.T) {
	for _, name := range []string{"first nested", "second nested", "both nested"} {
		t.Run(name, func(t *testing.T) {
			pl, started, release := firstHeld(t)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			agent := func(ctx context.Context, input string, nested bool) (runtime.AgentResult, error) {
				req := runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx), Input: input}
				if !nested {
					return pl.RunAgent(ctx, req)
				}
				var res runtime.AgentResult
				_, err := pl.Turn(ctx, runtime.TurnRequest{Input: input}, func(ctx context.Context) (string, error) {
					var err error
					res, err = pl.RunAgent(ctx, req)
					return res.Output, err
				})
				return res, err
			}
			_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "both"}, func(ctx context.Context) (string, error) {
				done := make(chan error, 1)
				go func() {
					_, err := agent(ctx, "first", name != "second nested")
					done <- err
				}()
				<-started
				_, err := agent(ctx, "second", name != "first nested")
				assert.ErrorIs(t, err, runtime.ErrRunBusy)
				close(release)
				require.NoError(t, <-done)
				res, err := agent(ctx, "third", true)
				return res.Output, err
			})
			require.NoError(t, err)
			transcript := pl.Transcript(ctx)
			require.Len(t, transcript, 4, "one after the other, each continues the transcript")
			assert.Equal(t, "answer to first", transcript[1].Text())
			assert.Equal(t, "answer to third", transcript[3].Text())
		})
	}
}

// TestAgentTurnOfAnotherRunInATurnBody: an agent turn run in a host's turn
// body with a context of another run, or on another pipeline, was handed
// to that turn as if part of it: the outer chain read its answers and, on
// refusing the outer turn, withheld their text from the other run's
// recorded transcript, which its own chain had let through. Such an agent
// turn is a turn of its own run and pipeline: the outer turn is left alone.
func TestAgentTurnOfAnotherRunInATurnBody(t *testing.T) {
	guard := rt.Layer("guard", `{"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")","phase":"after"}`)
	for _, name := range []string{"other run", "other pipeline"} {
		t.Run(name, func(t *testing.T) {
			deps := func() runtime.Deps {
				return runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"your acct 1234 is open"}})},
					Checkpoints: runtime.NewMemoryCheckpoints()}
			}
			outer := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), guard}}), deps())
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			inner, innerCtx := outer, func(ctx context.Context) context.Context { return runtime.WithRun(ctx, runtime.Run{ID: "r2"}) }
			if name == "other pipeline" {
				inner = rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}}), deps())
				innerCtx = func(ctx context.Context) context.Context { return ctx }
			}
			tr, err := outer.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
				res, err := inner.RunAgent(innerCtx(ctx), runtime.AgentRequest{Model: "primary", Input: "inner"})
				require.NoError(t, err)
				assert.Equal(t, "your acct 1234 is open", res.Output)
				return "done", nil
			})
			assert.NoError(t, err, "the outer turn's chain judges its own turn")
			assert.False(t, tr.Withheld)
			transcript := inner.Transcript(innerCtx(ctx))
			require.Len(t, transcript, 2)
			assert.Equal(t, "your acct 1234 is open", transcript[1].Text(), "the other run's own chain let it through")
		})
	}
}

// TestAgentTurnOfAnotherPipelineRefusedByItsOwnChain: an agent turn run in
// the body of another pipeline's turn, or with a context of another run,
// hands its answers to its own turn chain (AddEarlier) and has them
// withheld on its own chain's refusal (onRefused), never to the turn whose
// body it runs in: its own chain refuses it and withholds its text from
// its run's transcript, and the outer turn's chain reads none of it.
func TestAgentTurnOfAnotherPipelineRefusedByItsOwnChain(t *testing.T) {
	guard := rt.Layer("guard", `{"deny":"input.text == \"inner\" && output.text.contains(\"acct 1234\")","phase":"after"}`)
	calling := runtime.Delta{Text: "acct 1234: checking", FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "x", Name: "echo", Arguments: `{}`}}}
	for _, name := range []string{"other run", "other pipeline"} {
		t.Run(name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Stream: []runtime.Delta{calling}}, rt.Response{Deltas: []string{"all fine"}})},
				Checkpoints: store, Tools: map[string]runtime.ToolFunc{"echo": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}}
			inner := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), guard}}), deps)
			outer, innerCtx := inner, func(ctx context.Context) context.Context { return runtime.WithRun(ctx, runtime.Run{ID: "r2"}) }
			if name == "other pipeline" {
				deps.Checkpoints = runtime.NewMemoryCheckpoints()
				outer = rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`), rt.Layer("content_filter", `{"keywords":["acct 1234"]}`)}}), deps)
				innerCtx = func(ctx context.Context) context.Context { return ctx }
			}
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
			var agentCtx context.Context
			tr, err := outer.Turn(ctx, runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
				agentCtx = innerCtx(ctx)
				_, err := inner.RunAgent(agentCtx, runtime.AgentRequest{Model: "primary", Input: "inner"})
				assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err), "%v", err)
				return "done", nil
			})
			require.NoError(t, err, "the outer chain read none of the agent turn's answers")
			assert.False(t, tr.Withheld)
			assertNotRecorded(t, agentCtx, inner, store, "acct 1234")
		})
	}
}
