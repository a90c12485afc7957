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

// stop has the store write no more saves from now on, as the process
// killed now would.
func (s *stoppingStore) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = s.saves
}

// delegation is a run whose turn ("refund order 7") refunds order 7 and
// looks it up; the lookup is declared read-only, but its tool runs an
// agent turn of the run ("refund 9", or "ask 9", whose lookup of 9 runs
// "refund 9" in turn) that refunds order 9.
type delegation struct {
	// depth is the depth of the agent turn that refunds 9: 1, the turn
	// the lookup of 7 runs; 2, the turn the lookup of 9 that turn makes
	// runs.
	depth int
	// other has the lookups run the agent turns of another pipeline of
	// the run, without a checkpoint; else the run's own.
	other bool
	// saves bounds the saves the process makes before it dies (0: no
	// bound).
	saves int
	// crash is called by the tools at each point named ("refund 9" once
	// its effect is made, "lookup 7" once its agent turn returned).
	crash func(at string)

	mu   sync.Mutex
	made map[string]int
}

func (d *delegation) model() runtime.ModelClient {
	return runtime.ModelFunc(func(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		input, last := req.Messages[0].Text(), req.Messages[len(req.Messages)-1]
		var calls []runtime.ToolCallDelta
		switch input {
		case "refund order 7":
			calls = []runtime.ToolCallDelta{{Index: 0, ID: "c_refund", Name: "refund", Arguments: `{"order":7}`},
				{Index: 1, ID: "c_lookup", Name: "lookup", Arguments: `{"order":7}`}}
		case "refund 9":
			calls = []runtime.ToolCallDelta{{Index: 0, ID: "i_refund", Name: "refund", Arguments: `{"order":9}`}}
		case "ask 9":
			calls = []runtime.ToolCallDelta{{Index: 0, ID: "i_lookup", Name: "lookup", Arguments: `{"order":9}`}}
		}
		if last.Role == "tool" {
			calls = nil
		}
		if calls == nil {
			yield(runtime.Delta{Text: input + ": done", FinishReason: "stop"})
			return nil
		}
		yield(runtime.Delta{ToolCalls: calls, FinishReason: runtime.FinishToolCalls})
		return nil
	})
}

// tools returns the run's tools; pl is the pipeline the lookups run their
// agent turns in when d.other is nil.
func (d *delegation) tools(pl **runtime.Pipeline) map[string]runtime.ToolFunc {
	count := func(what string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.made[what]++
	}
	return map[string]runtime.ToolFunc{
		"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			what := fmt.Sprint("refund ", c.Args["order"])
			count(what)
			d.crash(what)
			return what + " ok", nil
		},
		"lookup": func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			what := fmt.Sprint("lookup ", c.Args["order"])
			count(what)
			input := "refund 9"
			if d.depth == 2 && what == "lookup 7" {
				input = "ask 9"
			}
			res, err := (*pl).RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: input})
			d.crash(what)
			if err == nil {
				err = ctx.Err()
			}
			return res.Output, err
		},
	}
}

// delegationPlan checkpoints each turn and each tool result (after_tool).
func delegationPlan() *plan.Plan {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
	return p
}

// runDelegation runs d's turn of run id in a process whose checkpoints
// reach store until the tools crash at the point named, then resumes the
// run in a new process and runs the turn on from its transcript. It
// returns the resumed turn's result and error, and the run's latest
// checkpoint before the resume.
func runDelegation(t *testing.T, d *delegation, at string) (runtime.AgentResult, error, runtime.Checkpoint) {
	t.Helper()
	base := runtime.NewMemoryCheckpoints()
	store := &stoppingStore{CheckpointStore: base, n: d.saves}
	if d.saves == 0 {
		store.n = 1 << 30
	}
	d.made = map[string]int{}
	d.crash = func(what string) {
		if what == at {
			store.stop()
		}
	}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "deleg"})
	var pl, delegate *runtime.Pipeline
	tools := d.tools(&pl)
	if d.other {
		// The tools of the run's pipeline run the other's agent turns,
		// which call the same tools.
		p := delegationPlan()
		p.Chains.Turn = nil
		tools = d.tools(&delegate)
		delegate = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": d.model()}, Tools: tools})
	}
	pl = rt.Build(t, delegationPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": d.model()}, Tools: tools, Checkpoints: store})
	_, _ = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxParallel: 1})
	require.True(t, store.dead(), "the process died at %s", at)
	require.NoError(t, pl.Close())

	d.crash = func(string) {}
	last, ok, err := base.LatestCheckpoint(context.Background(), "deleg")
	require.NoError(t, err)
	require.True(t, ok)
	pl = rt.Build(t, delegationPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": d.model()}, Tools: tools, Checkpoints: base})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = cp.Resume(ctx, "deleg")
	require.NoError(t, err)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	return res, err, last
}

// TestResumeOfACallWhoseToolRanAnAgent: a read-only lookup whose tool ran
// an agent turn of the run that refunded, the process killed inside the
// refund after its effect, was run again by the resumed turn, as nothing
// saved said the refund had started (a turn a tool runs records no calls
// of the run): its agent turn refunded a second time. Before such a call
// of a nested turn starts, the run records that the outer call it runs
// under has it under way, and saves (after_tool); the resumed turn finds
// the outer call in doubt and runs nothing. The same holds once the
// refund's outcome came back and was saved, the process killed later in
// the lookup, and for a refund two agent turns down, or in an agent turn
// of another pipeline the lookup runs.
func TestResumeOfACallWhoseToolRanAnAgent(t *testing.T) {
	lookup7 := use("c_lookup", "lookup", `{"order":7}`)
	for _, tc := range []struct {
		name  string
		d     *delegation
		crash string
		made  map[string]int
	}{
		{"killed in the refund", &delegation{depth: 1}, "refund 9", map[string]int{"refund 7": 1, "lookup 7": 1, "refund 9": 1}},
		{"killed in the lookup after its agent returned", &delegation{depth: 1}, "lookup 7", map[string]int{"refund 7": 1, "lookup 7": 1, "refund 9": 1}},
		{"two agent turns down", &delegation{depth: 2}, "refund 9", map[string]int{"refund 7": 1, "lookup 7": 1, "lookup 9": 1, "refund 9": 1}},
		{"two agent turns down, killed in the outer lookup", &delegation{depth: 2}, "lookup 7", map[string]int{"refund 7": 1, "lookup 7": 1, "lookup 9": 1, "refund 9": 1}},
		{"an agent turn of another pipeline", &delegation{depth: 1, other: true}, "refund 9", map[string]int{"refund 7": 1, "lookup 7": 1, "refund 9": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err, last := runDelegation(t, tc.d, tc.crash)
			assert.Equal(t, tc.made, tc.d.made, "nothing runs again")
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt, "the lookup is in doubt: %v", err)
			assert.Equal(t, "lookup", doubt.Tool)
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
			assert.Contains(t, err.Error(), "refund")
			require.NotEmpty(t, res.Messages)
			assert.Len(t, res.Messages[len(res.Messages)-1].ToolCalls, 2, "the calls are left for a person to answer")

			require.NotNil(t, last.Calls)
			key := callKey(1, lookup7)
			started := last.Calls.Delegated[key]
			require.Len(t, started, 1, "the refund under way was saved before it started: %+v", last.Calls)
			assert.Equal(t, "refund", started[0].Tool)
			if tc.d.other {
				// Named in the other pipeline's records, whose turn is its own.
				assert.Equal(t, callKey(1, use("i_refund", "refund", `{"order":9}`)), started[0].Call)
			} else {
				assert.True(t, strings.HasPrefix(started[0].Call, key+"/"), "%s is a call of the lookup's agent turn", started[0].Call)
			}
			var outcome []string
			for _, r := range last.Tools {
				if r.Call == started[0].Call {
					outcome = append(outcome, fmt.Sprint(r.Result))
				}
			}
			if tc.crash == "lookup 7" {
				assert.Equal(t, []string{"refund 9 ok"}, outcome, "the refund's outcome was saved")
			} else {
				assert.Empty(t, outcome)
			}
		})
	}
}

// TestDelegatedCallNotSavedDoesNotStart: a refund of an agent turn that a
// lookup's tool runs does not start when the save recording it under way
// fails (the process dies in it): a run resumed from the version before
// runs the lookup again, and its agent turn refunds once.
func TestDelegatedCallNotSavedDoesNotStart(t *testing.T) {
	// Saves: the outer turn's calls, the refund of 7's result; the one
	// before the refund of 9 fails.
	d := &delegation{depth: 1, saves: 2}
	res, err, last := runDelegation(t, d, "")
	require.NoError(t, err)
	assert.Equal(t, 2, last.Version)
	assert.Empty(t, last.Calls.Delegated)
	assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 2, "refund 9": 1}, d.made)
	assert.Equal(t, "refund order 7: done", res.Output)
}

// TestDelegatingCallCancelledAfterItsAgentRefunded: a worker draining
// (cancel with ErrShutdown) ended a lookup whose tool's agent turn had
// refunded: the lookup was answered "cancelled", as a read-only call
// cut short is, and saved so, so the resumed turn told the model the
// lookup did not complete (an attempt after, run by a layer of the turn
// chain, ran it again): its agent could refund again. Its tool having
// started a call that would repeat an effect, the cancelled call may have
// had that effect: it is in doubt, left unanswered, and the resumed turn
// ends in doubt too.
func TestDelegatingCallCancelledAfterItsAgentRefunded(t *testing.T) {
	store := runtime.NewMemoryCheckpoints()
	ctx, cancel := context.WithCancelCause(runtime.WithRun(context.Background(), runtime.Run{ID: "drain"}))
	defer cancel(nil)
	d := &delegation{depth: 1, made: map[string]int{}, crash: func(at string) {
		if at == "lookup 7" {
			cancel(runtime.ErrShutdown)
		}
	}}
	var pl *runtime.Pipeline
	deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": d.model()}, Tools: d.tools(&pl), Checkpoints: store}
	pl = rt.Build(t, delegationPlan(), deps)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxParallel: 1})
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
	assert.Equal(t, []string{"c_refund=refund 7 ok"}, answers(res.Messages), "the lookup is left unanswered")
	require.NoError(t, pl.Close())

	d.crash = func(string) {}
	pl = rt.Build(t, delegationPlan(), deps)
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	last, err := cp.Resume(context.Background(), "drain")
	require.NoError(t, err)
	assert.Equal(t, runtime.RunRunning, last.Status)
	rctx := runtime.WithRun(context.Background(), runtime.Run{ID: "drain"})
	_, err = pl.RunAgent(rctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(rctx)})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "%v", err)
	assert.Equal(t, "lookup", doubt.Tool)
	assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 1, "refund 9": 1}, d.made, "nothing runs again")
}
