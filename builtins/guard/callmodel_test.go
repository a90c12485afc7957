package guard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestChatGuardsReadToolCallsAndParams(t *testing.T) {
	refund := []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "refund", Arguments: `{"amount":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `500}`}}, FinishReason: runtime.FinishToolCalls},
	}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("big_refunds", rt.Layer("guard", `{"deny":"response.finish_reason == 'tool_calls' && response.tool_calls.exists(c, c.name == 'refund' && c.args.amount > 100)","phase":"after","message":"refunds over 100 need a human"}`)),
		rt.Named("cold", rt.Layer("guard", `{"deny":"has(request.params.temperature) && request.params.temperature > 1.0 || request.tools.exists(t, t.name == 'shell')"}`)),
	}})
	model := rt.NewModel(rt.Response{Stream: refund})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "refund me"}}}

	resp, err := pl.Complete(context.Background(), req)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "big_refunds", b.Layer)
	assert.Nil(t, resp.ToolCalls, "the blocked call never reached the caller")

	hot := 1.5
	req.Temperature = &hot
	_, err = pl.Complete(context.Background(), req)
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "cold", b.Layer)
	req.Temperature = nil
	req.Tools = []runtime.ToolDef{{Name: "shell"}}
	_, err = pl.Complete(context.Background(), req)
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "cold", b.Layer)
	assert.Equal(t, 1, model.Calls(), "before-phase guards refuse before the model runs")

	small := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_2", Name: "refund", Arguments: `{"amount":20}`}}, FinishReason: runtime.FinishToolCalls}}})
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": small}})
	req.Tools = nil
	resp, err = pl.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, resp.ToolCalls, 1)
	assert.JSONEq(t, `{"amount":20}`, string(resp.ToolCalls[0].Arguments))
	assert.Equal(t, runtime.FinishToolCalls, resp.FinishReason)
}
