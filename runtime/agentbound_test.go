package runtime_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// refunds is a model answer of n refund calls, each of its own order.
func refunds(n int) rt.Response {
	calls := make([]runtime.ToolUse, n)
	for i := range calls {
		calls[i] = use(fmt.Sprint("r", i), "refund", fmt.Sprintf(`{"order":%d}`, i+1))
	}
	return callTools(calls...)
}

// TestRunAgentBoundsTheCallsOfOneAnswer: a model answer with more tool
// calls than the turn's bound (an injected instruction, a model in a loop)
// ran every one of them, a refund each; none of them runs now, each is
// answered that the answer had too many, and the turn goes on. An answer
// within the bound runs whole.
func TestRunAgentBoundsTheCallsOfOneAnswer(t *testing.T) {
	cases := []struct {
		name   string
		bound  int
		calls  int
		ran    int
		refuse bool
	}{
		{name: "over the default", calls: runtime.DefaultAgentMaxToolCalls + 1, refuse: true},
		{name: "at the default", calls: runtime.DefaultAgentMaxToolCalls, ran: runtime.DefaultAgentMaxToolCalls},
		{name: "over a bound set", bound: 3, calls: 4, refuse: true},
		{name: "at a bound set", bound: 3, calls: 3, ran: 3},
		{name: "ten thousand", calls: 10000, refuse: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := rt.NewModel(refunds(tc.calls), rt.Response{Deltas: []string{"done"}})
			tools, made := countingTools(0)
			pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "bound"})
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund", MaxToolCalls: tc.bound})
			require.NoError(t, err)
			assert.Len(t, made(), tc.ran)
			assert.Equal(t, "done", res.Output)
			assert.Equal(t, tc.calls, res.ToolCalls)
			got := answers(res.Messages)
			require.Len(t, got, tc.calls, "every call is answered")
			if tc.refuse {
				bound := tc.bound
				if bound == 0 {
					bound = runtime.DefaultAgentMaxToolCalls
				}
				want := fmt.Sprintf("r0=error: not run: this answer has %d tool calls, more than the %d a step may make; call fewer tools at once", tc.calls, bound)
				assert.Equal(t, want, got[0])
				for _, a := range got {
					assert.True(t, strings.Contains(a, "=error: not run: this answer has"), a)
				}
			}
			assert.Equal(t, res.Messages, pl.Transcript(ctx))
		})
	}
}

// TestToolCallBuilderIsLinear: an answer's calls were assembled by looking
// each fragment's call up among all begun, so an answer of many calls (an
// answer over the turn's bound is read whole before it is refused) took
// time in the square of their number.
func TestToolCallBuilderIsLinear(t *testing.T) {
	build := func(n int) []runtime.ToolUse {
		var b runtime.ToolCallBuilder
		for i := range n {
			b.AddFragment(runtime.ToolCallDelta{Index: i, ID: fmt.Sprint("c", i), Name: "lookup"})
		}
		for i := range n { // the arguments after every call began: no fragment goes on the last call
			b.AddFragment(runtime.ToolCallDelta{Index: i, Arguments: `{"n":1}`})
		}
		return b.ToolCalls()
	}
	calls := build(100)
	require.Len(t, calls, 100)
	assert.Equal(t, runtime.ToolUse{ID: "c42", Name: "lookup", Arguments: []byte(`{"n":1}`)}, calls[42])
	run := func(n int) time.Duration { return cputime.Of(func() { build(n) }) }
	run(1000) // warm up
	small, large := run(4000), run(32000)
	assert.Less(t, large, 12*small+100*time.Millisecond, "4,000 calls took %v, 32,000 %v", small, large)
}

// TestToolCallBuilderOutOfOrder: fragments of many calls arriving out of
// order each go on their own call, before and after ToolCalls sorted them.
func TestToolCallBuilderOutOfOrder(t *testing.T) {
	var b runtime.ToolCallBuilder
	for i := 40; i > 0; i-- {
		b.AddFragment(runtime.ToolCallDelta{Index: i, ID: fmt.Sprint("c", i), Name: "lookup", Arguments: `{"n":`})
	}
	require.Len(t, b.ToolCalls(), 40)
	for i := 1; i <= 40; i++ {
		b.AddFragment(runtime.ToolCallDelta{Index: i, Arguments: fmt.Sprint(i, "}")})
	}
	b.AddFragment(runtime.ToolCallDelta{Index: 0, ID: "c0", Name: "lookup", Arguments: `{"n":0}`})
	calls := b.ToolCalls()
	require.Len(t, calls, 41)
	for i, c := range calls {
		assert.Equal(t, fmt.Sprint("c", i), c.ID)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(c.Arguments))
	}
}

// TestRunAgentLargeStepBound: a host that gives a turn a step bound it
// never means to reach (math.MaxInt32, math.MaxInt) had the turn reserve
// room for a transcript of that many steps before the first model call: it
// ran out of memory, or panicked. The bound only bounds.
func TestRunAgentLargeStepBound(t *testing.T) {
	for _, bound := range []int{math.MaxInt32, math.MaxInt} {
		model := rt.NewModel(callTools(use("x", "echo", `{"n":1}`)), rt.Response{Deltas: []string{"done"}})
		pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
			Tools: map[string]runtime.ToolFunc{"echo": func(_ context.Context, c *runtime.ToolCall) (any, error) { return c.Args, nil }}})
		res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go", MaxSteps: bound, MaxParallel: bound, MaxToolCalls: bound})
		require.NoError(t, err)
		assert.Equal(t, "done", res.Output)
		assert.Equal(t, 2, res.Steps)
	}
}

// TestRunAgentBoundsTheCallsOfAResumedAnswer: the last answer of a given
// transcript (a resumed run, a host's history) with more calls without a
// result than the turn's bound ran every read-only one of them (10,000
// lookups) before the model was called: no turn of that bound left such
// an answer. The turn is refused before anything runs, the error saying
// what to do; within the bound, the calls are settled as before.
func TestRunAgentBoundsTheCallsOfAResumedAnswer(t *testing.T) {
	transcript := func(n int) []runtime.Message {
		calls := make([]runtime.ToolUse, n)
		for i := range calls {
			calls[i] = use(fmt.Sprint("l", i), "lookup", fmt.Sprintf(`{"order":%d}`, i+1))
		}
		return []runtime.Message{{Role: "user", Content: "look them up"}, {Role: "assistant", ToolCalls: calls}}
	}
	for _, tc := range []struct {
		name         string
		calls, bound int
		refuse       bool
	}{
		{name: "ten thousand", calls: 10000, refuse: true},
		{name: "over a bound set", calls: 4, bound: 3, refuse: true},
		{name: "at the bound", calls: 3, bound: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
			tools, made := countingTools(0)
			pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: transcript(tc.calls), MaxToolCalls: tc.bound})
			if !tc.refuse {
				require.NoError(t, err)
				assert.Len(t, made(), tc.calls)
				return
			}
			require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
			assert.Contains(t, err.Error(), fmt.Sprintf("%d tool calls without a result", tc.calls))
			assert.Empty(t, made(), "no call runs")
			assert.Equal(t, 0, model.Calls())
			assert.Len(t, res.Messages, 2)
		})
	}
}
