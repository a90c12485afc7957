package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// runs records the run of every call it sees and the runs ended.
type runs struct {
	mu    sync.Mutex
	seen  []runtime.Run
	ended []string
}

var recorded = &runs{}

func (r *runs) see(run runtime.Run) {
	r.mu.Lock()
	r.seen = append(r.seen, run)
	r.mu.Unlock()
}

func (r *runs) take() ([]runtime.Run, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, ended := r.seen, r.ended
	r.seen, r.ended = nil, nil
	return seen, ended
}

// EndRun records id once (the one instance serves three chains, so the
// pipeline tells it three times).
func (r *runs) EndRun(id string) {
	r.mu.Lock()
	if n := len(r.ended); n == 0 || r.ended[n-1] != id {
		r.ended = append(r.ended, id)
	}
	r.mu.Unlock()
}

func (r *runs) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		r.see(c.Meta.Run)
		return next(ctx, c)
	}
}

func (r *runs) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		r.see(c.Meta.Run)
		return next(ctx, c, yield)
	}
}

func (r *runs) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		r.see(c.Meta.Run)
		return next(ctx, c)
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "test.runs", Stages: []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		New: func() runtime.Middleware { return recorded }})
}

// A call without a run id gets a run of its own, ended when it returns;
// a turn's own run is the run of the calls made inside it.
func TestCallWithoutRunGetsItsOwn(t *testing.T) {
	l := rt.Layer("test.runs", "")
	model := rt.NewModel(rt.Response{Deltas: []string{"hi"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{l}, Tool: []plan.Layer{l}, Turn: []plan.Layer{l}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"t": staticTool}})
	recorded.take()
	ctx := context.Background()

	for range 2 {
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
		require.NoError(t, err)
		_, err = pl.Complete(ctx, runtime.ChatRequest{Model: "primary"})
		require.NoError(t, err)
	}
	seen, ended := recorded.take()
	require.Len(t, seen, 4)
	ids := map[string]bool{}
	for i, r := range seen {
		assert.True(t, strings.HasPrefix(r.ID, "call-"), r.ID)
		ids[r.ID] = true
		assert.Equal(t, r.ID, ended[i], "a call's own run ends when it returns")
	}
	assert.Len(t, ids, 4, "calls without a run share one")

	// A run without an id keeps its other fields.
	_, err := pl.Tool(runtime.WithRun(ctx, runtime.Run{Tenant: "shop", Agent: "a"}), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	seen, _ = recorded.take()
	require.Len(t, seen, 1)
	assert.Equal(t, "shop", seen[0].Tenant)
	assert.Equal(t, "a", seen[0].Agent)
	assert.NotEmpty(t, seen[0].ID)

	// A turn: one run for the turn and its calls, ended once, after it.
	_, err = pl.Turn(ctx, runtime.TurnRequest{Input: "x"}, func(ctx context.Context) (string, error) {
		if _, err := pl.Tool(ctx, runtime.ToolRequest{Name: "t"}); err != nil {
			return "", err
		}
		_, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary"})
		return "done", err
	})
	require.NoError(t, err)
	seen, ended = recorded.take()
	require.Len(t, seen, 3)
	assert.Equal(t, seen[0].ID, seen[1].ID)
	assert.Equal(t, seen[0].ID, seen[2].ID)
	assert.Equal(t, []string{seen[0].ID}, ended)

	// A call with a run id keeps it, and its run is not ended.
	_, err = pl.Tool(runtime.WithRun(ctx, runtime.Run{ID: "job-1"}), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	seen, ended = recorded.take()
	assert.Equal(t, "job-1", seen[0].ID)
	assert.Empty(t, ended)
}

// Per-run budgets and idempotency are per call for calls without a run:
// never one process-wide implicit run.
func TestCallsWithoutRunShareNoState(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hi"}, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
	tool := rt.NewTool(rt.ToolResult{Value: "paid"})
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Layer("meter", `{"budget": {"calls": 1}, "scope": "run"}`)},
		Tool: []plan.Layer{rt.Layer("idempotent", "")},
	})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx := context.Background()
	for range 3 {
		_, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary"})
		require.NoError(t, err, "a run budget of one call refused a call of another anonymous call")
		res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
		require.NoError(t, err)
		assert.False(t, res.Deduped)
	}
	assert.Equal(t, 3, model.Calls())
	assert.Equal(t, 3, tool.Calls())
	keys := tool.Keys()
	assert.NotEqual(t, keys[0], keys[1])

	// Inside one run, the budget and the dedupe hold.
	run := runtime.WithRun(ctx, runtime.Run{ID: "r"})
	_, err := pl.Complete(run, runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	_, err = pl.Complete(run, runtime.ChatRequest{Model: "primary"})
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err))
	_, err = pl.Tool(run, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "B2"}})
	require.NoError(t, err)
	res, err := pl.Tool(run, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "B2"}})
	require.NoError(t, err)
	assert.True(t, res.Deduped)
}
