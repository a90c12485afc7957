package outputcoerce_test

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

func coercePipeline(t *testing.T, config string, model runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	return rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("answer.v1", rt.Layer("output_coerce", config))}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
}

func TestSetResponseFormat(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Text: "```json\n"}, {Text: `{"answer":"42","citations":[]}` + "\n```", FinishReason: runtime.FinishStop}}})
	pl := coercePipeline(t, `{"schema":`+answerSchema+`,"set_response_format":true}`, model)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "q"}}}
	resp, err := pl.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.JSONEq(t, `{"answer":"42","citations":[]}`, resp.Text)
	assert.Equal(t, runtime.FinishStop, resp.FinishReason, "the cleaned reply keeps the finish reason")

	own := &runtime.ResponseFormat{Type: runtime.FormatJSONObject}
	req.ResponseFormat = own
	_, err = pl.Complete(context.Background(), req)
	require.NoError(t, err)
	reqs := model.Requests()
	require.Len(t, reqs, 2)
	f := reqs[0].ResponseFormat
	require.NotNil(t, f)
	assert.Equal(t, runtime.FormatJSONSchema, f.Type)
	assert.Equal(t, "answer_v1", f.Name, "the entry's name as providers accept it")
	assert.JSONEq(t, answerSchema, string(f.Schema))
	assert.Same(t, own, reqs[1].ResponseFormat, "a request's own format wins")

	off := rt.NewModel(rt.Response{Deltas: []string{`{"answer":"a","citations":[]}`}})
	_, err = coercePipeline(t, `{"schema":`+answerSchema+`}`, off).Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Nil(t, off.Requests()[0].ResponseFormat, "off by default")
}

func TestToolCallingRepliesPassUnchecked(t *testing.T) {
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{Text: "let me look"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c", Name: "search", Arguments: `{"q":"x"}`}}, FinishReason: runtime.FinishToolCalls}}})
	resp, err := coercePipeline(t, `{"schema":`+answerSchema+`}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err, "a reply that calls tools is not the final output")
	assert.Equal(t, "let me look", resp.Text)
	require.Len(t, resp.ToolCalls, 1)
	assert.Equal(t, json.RawMessage(`{"q":"x"}`), resp.ToolCalls[0].Arguments)
}
