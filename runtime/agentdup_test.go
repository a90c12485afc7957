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
