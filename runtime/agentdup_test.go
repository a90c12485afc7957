package runtime_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// refundPlan checkpoints each turn and each tool result of a run whose
// refund has effects and whose lookup has none.
func refundPlan() *plan.Plan {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
	return p
}

// countingTools returns refund and lookup tools that count their calls by
// tool and "order" argument; the refund of order inDoubt ends in doubt.
func countingTools(inDoubt float64) (map[string]runtime.ToolFunc, func() map[string]int) {
	var mu sync.Mutex
	made := map[string]int{}
	count := func(name string) runtime.ToolFunc {
		return func(_ context.Context, c *runtime.ToolCall) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			order, _ := c.Args["order"].(float64)
			made[fmt.Sprint(name, " ", order)]++
			if name == "refund" && order == inDoubt {
				return nil, &runtime.InDoubtError{Layer: "bank", Tool: "refund", IdempotencyKey: "k"}
			}
			return fmt.Sprint(name, " ", order, " ok"), nil
		}
	}
	return map[string]runtime.ToolFunc{"refund": count("refund"), "lookup": count("lookup")}, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(made)
	}
}

// resumed stores saved as its run's checkpoint and returns a pipeline of
// refundPlan that resumed the run (with model and countingTools), the run's
// context and the count of the tools' calls.
func resumed(t *testing.T, saved runtime.Checkpoint, model *rt.Model) (*runtime.Pipeline, context.Context, func() map[string]int) {
	store := runtime.NewMemoryCheckpoints()
	_, err := store.SaveCheckpoint(context.Background(), saved)
	require.NoError(t, err)
	tools, made := countingTools(0)
	pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: store})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: saved.RunID})
	_, err = cp.Resume(ctx, saved.RunID)
	require.NoError(t, err)
	return pl, ctx, made
}

// answers returns the tool messages of msgs as "id=text".
func answers(msgs []runtime.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == "tool" {
			out = append(out, m.ToolCallID+"="+m.Parts[0].Text)
		}
	}
	return out
}

// TestRunAgentGivesEachCallAnIDOfItsOwn: a model that gives two tool calls
// of one answer the same id (or none) had both answered under that id, and
// a turn resumed after the first ended in doubt paired the second's result
// with the first call: the refund in doubt was taken as answered, the
// model asked again and told the second refund's result twice. Each call
// of the transcript now has an id of its own, so each result answers one
// call, and the resumed turn ends in doubt.
func TestRunAgentGivesEachCallAnIDOfItsOwn(t *testing.T) {
	t.Run("live", func(t *testing.T) {
		model := rt.NewModel(callTools(use("c1", "refund", `{"order":7}`), use("c1", "refund", `{"order":8}`),
			use("", "lookup", `{"order":1}`), use("", "lookup", `{"order":2}`), use("c1_2", "lookup", `{"order":3}`)),
			rt.Response{Deltas: []string{"done"}})
		tools, made := countingTools(0)
		pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
		res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"refund 7": 1, "refund 8": 1, "lookup 1": 1, "lookup 2": 1, "lookup 3": 1}, made())
		var ids []string
		for _, c := range res.Messages[1].ToolCalls {
			ids = append(ids, c.ID)
		}
		assert.Equal(t, []string{"c1", "c1_2_2", "call_3", "call_4", "c1_2"}, ids)
		assert.Equal(t, []string{"c1=refund 7 ok", "c1_2_2=refund 8 ok", "call_3=lookup 1 ok", "call_4=lookup 2 ok", "c1_2=lookup 3 ok"},
			answers(model.Requests()[1].Messages))
	})

	t.Run("resumed after the first ended in doubt", func(t *testing.T) {
		store := runtime.NewMemoryCheckpoints()
		model := rt.NewModel(callTools(use("c1", "refund", `{"order":7}`), use("c1", "refund", `{"order":8}`)),
			rt.Response{Deltas: []string{"refunded 8, and 7 again"}})
		tools, made := countingTools(7)
		pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: store})
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "dup"})
		_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 7 and 8", MaxParallel: 1})
		require.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
		require.NoError(t, pl.Close())

		pl = rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: store})
		cp, err := pl.Checkpointer("")
		require.NoError(t, err)
		_, err = cp.Resume(ctx, "dup")
		require.NoError(t, err)
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
		var doubt *runtime.InDoubtError
		require.ErrorAs(t, err, &doubt, "the refund of 7 is still in doubt")
		assert.Equal(t, 1, model.Calls(), "the model is not asked again")
		assert.Equal(t, map[string]int{"refund 7": 1, "refund 8": 1}, made())
		assert.Equal(t, []string{"c1_2=refund 8 ok"}, answers(res.Messages), "the refund of 8 keeps its one answer")
	})

	// A transcript saved before (or written by a host) with two calls of
	// one id and one result naming it: which call it answers is not
	// known, so each refund of the id is in doubt and nothing runs.
	t.Run("transcript with a shared id", func(t *testing.T) {
		r7, r8, l1 := use("c1", "refund", `{"order":7}`), use("c1", "refund", `{"order":8}`), use("c1", "lookup", `{"order":1}`)
		model := rt.NewModel(rt.Response{Deltas: []string{"refunded 7 again"}})
		pl, ctx, made := resumed(t, runtime.Checkpoint{RunID: "old", Status: runtime.RunRunning,
			Transcript: []runtime.Message{{Role: "user", Content: "refund 7 and 8"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{r7, r8, l1}},
				{Role: "tool", ToolCallID: "c1", Content: "refund 8 ok"}},
			Tools: []runtime.ToolRecord{{Tool: "refund", Call: callKey(1, r8), Result: "refund 8 ok"}}}, model)
		_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
		require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
		assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
		assert.Contains(t, err.Error(), `message 1 (assistant) has 3 tool calls of id "c1" and results for 1 of them: which of them a result answers is not known`)
		var doubt *runtime.InDoubtError
		require.ErrorAs(t, err, &doubt)
		assert.Equal(t, "refund", doubt.Tool)
		assert.Zero(t, model.Calls())
		assert.Empty(t, made())
	})
}

// TestRunAgentRunsARepeatedSideEffectingCallOnce: a model that asks for the
// same side-effecting call twice in one answer (the same tool and
// arguments, under two ids) had it made twice. The repeat does not run: it
// is answered that it repeats the first, which runs once. A read-only call
// repeated runs each time. A turn resumed with both calls pending, the
// first's result saved, answers the first from its record and the repeat
// as the live turn did, instead of taking the repeat for a call in doubt.
func TestRunAgentRunsARepeatedSideEffectingCallOnce(t *testing.T) {
	const repeat = "error: not run: this call repeats call r1 of the same step (the same tool and arguments), which runs once; " +
		"call the tool again in a later step if a second call is meant"
	calls := []runtime.ToolUse{use("r1", "refund", `{"order":7, "note":"x"}`), use("l1", "lookup", `{"order":7}`),
		use("r2", "refund", `{"note":"x","order":7.0}`), use("l2", "lookup", `{"order":7}`), use("r3", "refund", `{"order":8}`)}
	t.Run("live", func(t *testing.T) {
		model := rt.NewModel(callTools(calls...), rt.Response{Deltas: []string{"done"}})
		tools, made := countingTools(0)
		pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
		res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 2, "refund 8": 1}, made())
		assert.Equal(t, []string{"r1=refund 7 ok", "l1=lookup 7 ok", "r2=" + repeat, "l2=lookup 7 ok", "r3=refund 8 ok"},
			answers(res.Messages))
		assert.True(t, res.Messages[4].Parts[0].IsError)
		assert.Equal(t, 5, res.ToolCalls)
	})

	t.Run("resumed", func(t *testing.T) {
		model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
		pl, ctx, made := resumed(t, runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning,
			Transcript: []runtime.Message{{Role: "user", Content: "refund 7"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{calls[0], calls[2]}}},
			Tools: []runtime.ToolRecord{{Tool: "refund", Call: callKey(1, calls[0]), Result: "refund 7 ok"}}}, model)
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
		require.NoError(t, err)
		assert.Empty(t, made(), "nothing runs again")
		assert.Equal(t, []string{"r1=refund 7 ok", "r2=" + repeat}, answers(res.Messages))
		assert.Equal(t, "done", res.Output)
	})
}

// stoppingStore writes the first n saves and then no more, as a process
// killed after its n-th save.
type stoppingStore struct {
	runtime.CheckpointStore
	n     int
	saves int
	mu    sync.Mutex
}

func (s *stoppingStore) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saves >= s.n {
		return 0, fmt.Errorf("the process is dead")
	}
	s.saves++
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// dead reports whether the process died (made its last save).
func (s *stoppingStore) dead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves >= s.n
}

// TestRunAgentResumesCallsOfSpacedArguments: a model's arguments as they
// stream often hold spaces and escapes a checkpoint does not keep (the
// store writes them compact). The record of each call was keyed on the
// arguments as they arrived, so a run killed after a refund's result was
// saved resumed with no record answering the refund: it was reported in
// doubt, and a read-only call ran again. The key is taken of the
// arguments as a checkpoint writes them.
func TestRunAgentResumesCallsOfSpacedArguments(t *testing.T) {
	base := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "spaced"})
	calls := []runtime.ToolUse{use("r1", "refund", "{\"order\": 7,\n \"note\": \"<ok>\"}"), use("l1", "lookup", `{ "order" : 7 }`)}
	tools, made := countingTools(0)
	// Saves: the model's calls, then each result; the process dies then.
	store := &stoppingStore{CheckpointStore: base, n: 3}
	first := rt.NewModel(callTools(calls...), rt.Response{Deltas: []string{"unused"}})
	pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": first}, Tools: tools, Checkpoints: store})
	_, _ = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 7", MaxParallel: 1})
	require.NoError(t, pl.Close())
	require.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 1}, made())

	second := rt.NewModel(rt.Response{Deltas: []string{"refunded"}})
	pl = rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second}, Tools: tools, Checkpoints: base})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	last, err := cp.Resume(ctx, "spaced")
	require.NoError(t, err)
	require.Equal(t, 3, last.Version)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	require.NoError(t, err)
	assert.Equal(t, "refunded", res.Output)
	assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 1}, made(), "nothing runs again")
	assert.Equal(t, []string{"r1=refund 7 ok", "l1=lookup 7 ok"}, answers(second.Requests()[0].Messages))
}
