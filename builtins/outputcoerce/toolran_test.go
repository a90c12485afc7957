package outputcoerce_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/audit"
	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A result the layer refuses is the result of a tool that ran: the error
// says so (runtime.ErrRan), so no layer outside reads it as a call that
// did not act, and it is still the layer's *ResultError, permanent.
func TestToolResultRefusedSaysTheToolRan(t *testing.T) {
	pl := toolPipeline(t, `{}`, map[string]any{"order": map[string]any{"status": "lost"}})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "order"})
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, runtime.ErrRan)
	assert.False(t, runtime.DidNotRun(err))
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
	assert.Equal(t, string(runtime.KindPermanent), runtime.KindOf(err))
	assert.Equal(t, "output_coerce", runtime.LayerOf(err))
	assert.Equal(t, "output_coerce: "+"result of tool order does not match its result_schema: /status: "+re.Diagnostics[0].Message, err.Error(),
		"the message is the layer's alone")
}

// A side-effecting refund whose result does not match its result_schema
// has run: the idempotent layer outside keeps its outcome, so the same
// refund asked again (in another run too) does not run again; the audit
// layer outside records it "ran", and a tool meter charges it (not its
// duplicates, answered from the stored outcome), so that budget.calls 2
// admits one more refund and refuses the next before it runs.
func TestToolResultRefusedIsAnOutcomeForTheLayersOutside(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("audit", `{}`),
		rt.Layer("meter", `{"budget":{"calls":2},"scope":"global"}`),
		rt.Layer("idempotent", `{"key_args":["order_id"]}`),
		rt.Layer("output_coerce", `{}`),
	}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true,
		ResultSchema: json.RawMessage(`{"type":"object","required":["refunded"],"properties":{"refunded":{"type":"number"}}}`)}}
	tool := rt.NewTool(rt.ToolResult{Value: map[string]any{"refunded": "10.00"}}, rt.ToolResult{Value: map[string]any{"refunded": 5}})
	audit := &runtime.MemoryAudit{}
	pl := rt.Build(t, p, runtime.Deps{Audit: audit, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})

	call := func(run, order string) error {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: "bank"})
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": order, "amount": 10.0}})
		return err
	}
	err := call("run-a", "ORD-1")
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re)
	for _, run := range []string{"run-b", "run-a"} {
		err := call(run, "ORD-1")
		assert.ErrorIs(t, err, runtime.ErrRan, run)
		assert.Equal(t, "idempotent", runtime.LayerOf(err), run)
		assert.Equal(t, string(runtime.KindPermanent), runtime.KindOf(err), run)
		assert.Contains(t, err.Error(), re.Error(), run)
	}
	assert.Equal(t, 1, tool.Calls(), "the refund ran once")

	require.NoError(t, call("run-c", "ORD-2"))
	err = call("run-c", "ORD-3")
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "the refund that ran was charged: %v", err)
	assert.Equal(t, 2, tool.Calls(), "the next refund is refused before it runs")

	var decisions []string
	for _, r := range audit.Records() {
		if r.Decision != "" {
			decisions = append(decisions, string(r.Decision))
		}
	}
	assert.Equal(t, []string{"ran", "deduped", "deduped", "ok", "denied"}, decisions)
}

// The chat stage: a model's answer the layer refuses was made and billed.
// A meter outside charges its tokens though the call failed, so that a
// tokens ceiling it reached refuses the next call before it runs.
func TestChatOutputRefusedIsCharged(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"budget":{"tokens":10},"scope":"global"}`),
		rt.Layer("output_coerce", `{"schema":{"type":"object"}}`),
	}})
	model := rt.NewModel(rt.Response{Deltas: []string{"not json"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	_, _, err := rt.Collect(context.Background(), pl, req, 0)
	var ce *outputcoerce.CoercionError
	require.ErrorAs(t, err, &ce)
	_, _, err = rt.Collect(context.Background(), pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "the refused answer's 15 tokens were charged: %v", err)
	assert.Equal(t, 1, model.Calls())
}
