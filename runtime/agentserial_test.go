package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRunAgentHonoursSerialToolCalls: a turn whose Params say
// ParallelToolCalls false (OpenAI's parallel_tool_calls false,
// Anthropic's disable_parallel_tool_use) had every call of an answer of
// several run, as though it allowed them: the refund and the lookup ran
// together. None of the calls of such an answer runs: each is answered
// that the turn allows one call per answer, as agentc serve refuses such
// an answer, and the model, asked again, makes one call at a time. A
// repeated refund of such an answer is answered so too, not as a repeat.
func TestRunAgentHonoursSerialToolCalls(t *testing.T) {
	const serial = "error: not run: this answer has 2 tool calls, and the turn allows one tool call per answer (parallel_tool_calls false); call one tool at a time"
	model := rt.NewModel(
		callTools(use("r1", "refund", `{"order":7}`), use("l1", "lookup", `{"order":7}`)),
		callTools(use("r2", "refund", `{"order":7}`), use("r3", "refund", `{"order":7}`)),
		callTools(use("r4", "refund", `{"order":7}`)),
		rt.Response{Deltas: []string{"refunded 7"}})
	tools, made := countingTools(0)
	pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
	no := false
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "refund 7",
		Params: runtime.ChatRequest{ParallelToolCalls: &no}})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"refund 7": 1}, made(), "the one call of the third answer runs, and it alone")
	assert.Equal(t, []string{"r1=" + serial, "l1=" + serial, "r2=" + serial, "r3=" + serial, "r4=refund 7 ok"}, answers(res.Messages))
	assert.True(t, res.Messages[2].Parts[0].IsError)
	assert.Equal(t, "refunded 7", res.Output)
	assert.Equal(t, 5, res.ToolCalls)
	assert.Equal(t, 4, res.Steps)
	for i, req := range model.Requests() {
		require.NotNil(t, req.ParallelToolCalls, "request %d", i)
		assert.False(t, *req.ParallelToolCalls, "request %d asks the provider for one call", i)
	}

	t.Run("allowed", func(t *testing.T) {
		model := rt.NewModel(callTools(use("r1", "refund", `{"order":7}`), use("l1", "lookup", `{"order":7}`)),
			rt.Response{Deltas: []string{"done"}})
		tools, made := countingTools(0)
		pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
		yes := true
		_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go",
			Params: runtime.ChatRequest{ParallelToolCalls: &yes}})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"refund 7": 1, "lookup 7": 1}, made())
	})
}
