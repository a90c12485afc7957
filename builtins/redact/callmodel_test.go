package redact_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestChatToolCallArgumentsAreRedactedWhole(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Text: "deploying\nwith key " + awsKey[:8]},
		{Text: awsKey[8:] + "\n", ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "deploy", Arguments: `{"env":"prod","key":"` + awsKey[:10]}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: awsKey[10:] + `","n":2}`}, {Index: 1, ID: "c2", Name: "notify", Arguments: `{"msg":"done"}`}}},
		{FinishReason: runtime.FinishToolCalls, Usage: runtime.Usage{InputTokens: 5, OutputTokens: 7}},
	}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var got []runtime.Delta
	resp, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	})
	require.NoError(t, err)
	var calls runtime.ToolCallBuilder
	text := ""
	var usage runtime.Usage
	for _, d := range got {
		text += d.Text
		calls.Add(&d)
		usage.Add(d.Usage)
	}
	assert.NotContains(t, text, awsKey)
	assert.Contains(t, text, "deploying\nwith key [REDACTED:")
	list := calls.ToolCalls()
	require.Len(t, list, 2)
	var args map[string]any
	require.NoError(t, json.Unmarshal(list[0].Arguments, &args), "the arguments stay valid JSON")
	assert.Equal(t, "prod", args["env"])
	assert.Equal(t, 2.0, args["n"])
	assert.NotContains(t, args["key"], awsKey)
	assert.Contains(t, args["key"], "[REDACTED:")
	assert.JSONEq(t, `{"msg":"done"}`, string(list[1].Arguments))
	last := got[len(got)-1]
	assert.Len(t, last.ToolCalls, 2, "the calls come last, after the text")
	assert.Equal(t, runtime.FinishToolCalls, last.FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 5, OutputTokens: 7}, usage)
	assert.Equal(t, len(got), resp.Deltas)
}
