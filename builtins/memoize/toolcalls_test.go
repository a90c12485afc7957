package memoize_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// bankPlan has a chat memoize of config, a side-effecting transfer and a
// read-only balance.
func bankPlan(config string) *plan.Plan {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", config)}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true}, "balance": {}}
	return p
}

func bankRequest() runtime.ChatRequest {
	return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "Please transfer 100 EUR to DE89"}},
		Tools: []runtime.ToolDef{{Name: "transfer"}, {Name: "balance"}, {Name: "lookup"}}}
}

// A hit makes the caller run the calls the answer holds: an answer calling
// a side-effecting tool, or one the policy does not declare, is never
// stored, so the same request asks the model again and no payment is made
// twice from the cache.
func TestChatAnswerCallingSideEffectingToolIsNotCached(t *testing.T) {
	for name, answers := range map[string][]rt.Response{
		"side-effecting": {rt.CallResponse("call_1", "transfer", `{"amount":100}`), rt.CallResponse("call_2", "transfer", `{"amount":100}`)},
		"undeclared":     {rt.CallResponse("call_1", "lookup", `{}`), rt.CallResponse("call_2", "lookup", `{}`)},
		"one of several": {
			{Stream: []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "balance", Arguments: `{}`},
				{Index: 1, ID: "call_2", Name: "transfer", Arguments: `{"amount":100}`}}, FinishReason: runtime.FinishToolCalls}}},
			rt.CallResponse("call_3", "balance", `{}`),
		},
	} {
		t.Run(name, func(t *testing.T) {
			model := rt.NewModel(answers...)
			pl := rt.Build(t, bankPlan(`{"scope": "global"}`), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			first, err := pl.Complete(ctx1, bankRequest())
			require.NoError(t, err)
			second, err := pl.Complete(ctx1, bankRequest())
			require.NoError(t, err)
			assert.False(t, second.Cached, "not stored")
			assert.Equal(t, 2, model.Calls(), "the model is asked again")
			assert.NotEqual(t, first.ToolCalls[0].ID, second.ToolCalls[0].ID, "the model's own calls")
		})
	}
}

// An answer calling read-only tools is replayed, each replay with call ids
// of its own: a replayed id would be the id of the call that ran when the
// answer was recorded.
func TestChatAnswerCallingReadOnlyToolIsReplayedWithIDsOfItsOwn(t *testing.T) {
	model := rt.NewModel(rt.CallResponse("call_1", "balance", `{"account":"A"}`))
	pl := rt.Build(t, bankPlan(""), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	ids := map[string]bool{}
	for i := range 3 {
		resp, err := pl.Complete(ctx1, bankRequest())
		require.NoError(t, err)
		assert.Equal(t, i > 0, resp.Cached)
		require.Len(t, resp.ToolCalls, 1)
		assert.Equal(t, "balance", resp.ToolCalls[0].Name)
		assert.JSONEq(t, `{"account":"A"}`, string(resp.ToolCalls[0].Arguments))
		assert.False(t, ids[resp.ToolCalls[0].ID], "id %q given before", resp.ToolCalls[0].ID)
		ids[resp.ToolCalls[0].ID] = true
	}
	assert.Equal(t, 1, model.Calls())
}

// An entry stored while the tool was declared read-only (or by another
// policy sharing the store) is not replayed by a policy that declares it
// side-effecting.
func TestChatEntryCallingANowSideEffectingToolIsAMiss(t *testing.T) {
	kv := runtime.NewMemoryKV()
	before := bankPlan(`{"scope": "global"}`)
	before.Tools["transfer"] = plan.Tool{}
	old := rt.Build(t, before, runtime.Deps{KV: kv, Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.CallResponse("call_1", "transfer", `{"amount":100}`))}})
	_, err := old.Complete(ctx1, bankRequest())
	require.NoError(t, err)
	hit, err := old.Complete(ctx1, bankRequest())
	require.NoError(t, err)
	require.True(t, hit.Cached, "stored while transfer was read-only")

	model := rt.NewModel(rt.CallResponse("call_9", "transfer", `{"amount":100}`))
	pl := rt.Build(t, bankPlan(`{"scope": "global"}`), runtime.Deps{KV: kv, Models: map[string]runtime.ModelClient{"primary": model}})
	resp, err := pl.Complete(ctx1, bankRequest())
	require.NoError(t, err)
	assert.False(t, resp.Cached)
	assert.Equal(t, 1, model.Calls(), "the model is asked")
	assert.Equal(t, "call_9", resp.ToolCalls[0].ID)
}

// With single_flight, concurrent identical requests whose answer calls a
// side-effecting tool do not share it: each asks the model, and none is
// answered from the cache.
func TestSingleFlightDoesNotShareSideEffectingCalls(t *testing.T) {
	answer := rt.CallResponse("call_1", "transfer", `{"amount":100}`)
	answer.Delay = 20 * time.Millisecond
	model := rt.NewModel(answer)
	pl := rt.Build(t, bankPlan(flightConfig), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := pl.Complete(ctx1, bankRequest())
			if assert.NoError(t, err) {
				assert.False(t, resp.Cached)
				assert.Len(t, resp.ToolCalls, 1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 4, model.Calls(), "each request asked the model")
}
