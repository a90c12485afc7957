package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// delegating returns a model and tools for an agent turn ("plan the trip")
// whose first answer asks the delegate tool twice, which runs an agent
// turn of its own with the call's task as its input ("flights",
// "hotels"); each of those looks its task up, then answers.
func delegating(pl **runtime.Pipeline) (runtime.ModelClient, map[string]runtime.ToolFunc) {
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		input, last := req.Messages[0].Text(), req.Messages[len(req.Messages)-1]
		var d runtime.Delta
		switch {
		case input == "plan the trip" && last.Role == "user":
			d = runtime.Delta{Text: "asking both", FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{
				{Index: 0, ID: "call_1", Name: "delegate", Arguments: `{"task":"flights"}`},
				{Index: 1, ID: "call_2", Name: "delegate", Arguments: `{"task":"hotels"}`}}}
		case input == "plan the trip":
			d = runtime.Delta{Text: "trip planned"}
		case last.Role == "user":
			d = runtime.Delta{Text: "looking up " + input, FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{
				{Index: 0, ID: "call_1", Name: "lookup", Arguments: `{}`}}}
		default:
			d = runtime.Delta{Text: input + " found"}
		}
		yield(d)
		return nil
	})
	tools := map[string]runtime.ToolFunc{
		"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
		"delegate": func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			res, err := (*pl).RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: fmt.Sprint(c.Args["task"])})
			return res.Output, err
		},
	}
	return model, tools
}

// delegatingPipeline builds a pipeline of delegating's model and tools
// whose turn chain is turn; check, when set, runs in each lookup.
func delegatingPipeline(t *testing.T, turn []plan.Layer, check func(context.Context, *runtime.Pipeline)) (*runtime.Pipeline, *runtime.MemoryCheckpoints) {
	var pl *runtime.Pipeline
	model, tools := delegating(&pl)
	if check != nil {
		tools["lookup"] = func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			check(ctx, pl)
			return "ok", nil
		}
	}
	store := runtime.NewMemoryCheckpoints()
	p := rt.Plan(plan.Chains{Turn: turn})
	p.Tools = map[string]plan.Tool{"delegate": {}, "lookup": {}}
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: store})
	return pl, store
}

// planTrip runs the delegating turn of run id, its delegates two at once,
// and returns its result and context.
func planTrip(t *testing.T, pl *runtime.Pipeline, id string) (runtime.AgentResult, context.Context) {
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: id})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "plan the trip", MaxParallel: 2})
	assert.NoError(t, err)
	assert.Equal(t, "trip planned", res.Output)
	return res, ctx
}

// TestNestedAgentTurnsOfOneAnswer: an agent turn's tool that runs an agent
// turn of its own (two such calls of one answer, at once) ran it as a turn
// of the same run: each recorded its transcript, the calls it was making
// and their results as the run's, over the outer turn's, so a version
// saved meanwhile (after_tool) held a nested turn's transcript as the
// run's, which a resume would have continued in place of the outer turn.
// The run's records are the outer turn's alone now; a nested turn's tool
// results are recorded apart from the outer turn's calls.
func TestNestedAgentTurnsOfOneAnswer(t *testing.T) {
	pl, store := delegatingPipeline(t, []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}, nil)
	planTrip(t, pl, "trip")

	versions, err := store.CheckpointVersions(context.Background(), "trip")
	require.NoError(t, err)
	require.NotEmpty(t, versions)
	var calls []string
	for _, v := range versions {
		cp, ok, err := store.CheckpointAt(context.Background(), "trip", v)
		require.NoError(t, err)
		require.True(t, ok)
		require.NotEmpty(t, cp.Transcript)
		assert.Equal(t, "plan the trip", cp.Transcript[0].Text(), "version %d is the outer turn's", v)
		if cp.Calls != nil {
			assert.Len(t, cp.Calls.Calls, 2, "version %d records the outer turn's calls", v)
			calls = cp.Calls.Calls
		}
	}
	cp, _, err := store.LatestCheckpoint(context.Background(), "trip")
	require.NoError(t, err)
	var outer []string
	for _, r := range cp.Tools {
		if r.Tool == "delegate" {
			outer = append(outer, r.Call)
			continue
		}
		for _, c := range calls {
			assert.False(t, strings.HasPrefix(c, r.Call), "a nested call's record %q is not taken for the outer call %q", r.Call, c)
		}
	}
	assert.ElementsMatch(t, calls, outer)
}

// TestNestedAgentTurnsRace runs TestNestedAgentTurnsOfOneAnswer's turn
// several times at once (go test -race): while the nested turns run, the
// run's recorded transcript is the outer turn's.
func TestNestedAgentTurnsRace(t *testing.T) {
	pl, _ := delegatingPipeline(t, []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true}`)}, func(ctx context.Context, pl *runtime.Pipeline) {
		assert.Equal(t, "plan the trip", pl.Transcript(ctx)[0].Text(), "the run's transcript while a nested turn runs")
	})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, ctx := planTrip(t, pl, fmt.Sprint("trip", i))
			assert.Equal(t, "plan the trip", pl.Transcript(ctx)[0].Text())
		})
	}
	wg.Wait()
}

// TestNestedAgentTurnRefused: a delegate's turn that its turn chain
// refused ran the checkpoint's end of its own: it finished the run as
// failed while the outer turn went on (the model told the tool failed),
// and the outer turn's save was then refused, so the turn that answered
// ended blocked. A nested turn's ends are the outer turn's: the run is
// saved once, as the outer turn ended.
func TestNestedAgentTurnRefused(t *testing.T) {
	pl, store := delegatingPipeline(t, []plan.Layer{rt.Layer("checkpoint", `{}`), rt.Layer("guard", `{"deny":"input.text == \"flights\"","phase":"before"}`)}, nil)
	res, _ := planTrip(t, pl, "trip")
	require.Contains(t, answers(res.Messages)[0], "call_1=refused", "the delegate's refusal is the tool's answer")
	cp, _, err := store.LatestCheckpoint(context.Background(), "trip")
	require.NoError(t, err)
	assert.Equal(t, runtime.RunRunning, cp.Status)
	assert.Equal(t, 1, cp.Version, "one save, at the outer turn's end")
}

// TestDelegateOfAnotherPipeline: a tool that runs an agent turn of another
// pipeline, of the same run id, runs a turn of that pipeline's run, which
// records its own transcript.
func TestDelegateOfAnotherPipeline(t *testing.T) {
	var inner *runtime.Pipeline
	model, tools := delegating(&inner)
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}})
	p.Tools = map[string]plan.Tool{"delegate": {}, "lookup": {}}
	deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()}
	inner = rt.Build(t, p, deps)
	deps.Checkpoints = runtime.NewMemoryCheckpoints()
	outer := rt.Build(t, p, deps)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "trip"})
	res, err := outer.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "plan the trip", MaxParallel: 1})
	require.NoError(t, err)
	assert.Equal(t, "trip planned", res.Output)
	assert.Equal(t, "plan the trip", outer.Transcript(ctx)[0].Text())
	require.NotEmpty(t, inner.Transcript(ctx), "the other pipeline's run records its turns")
	assert.Contains(t, []string{"flights", "hotels"}, inner.Transcript(ctx)[0].Text())
}

// TestConcurrentAgentTurnsOfOneHostTurn: a host's turn body that ran two
// agent turns of its run at once had each record its transcript as the
// run's over the other's, so the version saved after the turn lacked one
// (a refund made, gone from the run's history). While the run is
// recorded, the second is refused before anything runs (ErrRunBusy), as a
// second turn of the run is; one after the other, both run.
func TestConcurrentAgentTurnsOfOneHostTurn(t *testing.T) {
	pl, started, release := firstHeld(t)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "both"}, func(ctx context.Context) (string, error) {
		done := make(chan error, 1)
		go func() {
			_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "first"})
			done <- err
		}()
		<-started
		_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "second"})
		assert.ErrorIs(t, err, runtime.ErrRunBusy)
		assert.True(t, runtime.DidNotRun(err), "the refused agent turn ran nothing: %v", err)
		close(release)
		require.NoError(t, <-done)
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx), Input: "third"})
		return res.Output, err
	})
	require.NoError(t, err)
	transcript := pl.Transcript(ctx)
	require.Len(t, transcript, 4)
	assert.Equal(t, "answer to first", transcript[1].Text())
	assert.Equal(t, "answer to third", transcript[3].Text())
}
