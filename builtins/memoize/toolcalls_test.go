package memoize_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
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
// side-effecting: a miss, not an error, in a Redis store too and with
// single_flight, whose claim finds the entry.
func TestChatEntryCallingANowSideEffectingToolIsAMiss(t *testing.T) {
	for name, kv := range map[string]func(t *testing.T) runtime.KV{
		"memory": func(*testing.T) runtime.KV { return runtime.NewMemoryKV() },
		"redis":  func(t *testing.T) runtime.KV { return storetest.Redis(t) },
	} {
		for _, config := range []string{`{"scope": "global"}`, flightConfig} {
			t.Run(name+" "+config, func(t *testing.T) {
				kv := kv(t)
				before := bankPlan(config)
				before.Tools["transfer"] = plan.Tool{}
				old := rt.Build(t, before, runtime.Deps{KV: kv, Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.CallResponse("call_1", "transfer", `{"amount":100}`))}})
				_, err := old.Complete(ctx1, bankRequest())
				require.NoError(t, err)
				hit, err := old.Complete(ctx1, bankRequest())
				require.NoError(t, err)
				require.True(t, hit.Cached, "stored while transfer was read-only")

				model := rt.NewModel(rt.CallResponse("call_9", "transfer", `{"amount":100}`), rt.CallResponse("call_10", "transfer", `{"amount":100}`))
				pl := rt.Build(t, bankPlan(config), runtime.Deps{KV: kv, Models: map[string]runtime.ModelClient{"primary": model}})
				for i, id := range []string{"call_9", "call_10"} {
					resp, err := pl.Complete(ctx1, bankRequest())
					require.NoError(t, err)
					assert.False(t, resp.Cached)
					assert.Equal(t, i+1, model.Calls(), "the model is asked")
					assert.Equal(t, id, resp.ToolCalls[0].ID)
				}
			})
		}
	}
}

// With single_flight, concurrent identical requests whose answer calls a
// side-effecting tool do not share it: each asks the model, and none is
// answered from the cache.
func TestSingleFlightDoesNotShareSideEffectingCalls(t *testing.T) {
	answer := rt.CallResponse("call_1", "transfer", `{"amount":100}`)
	answer.Delay = 20 * time.Millisecond
	model := rt.NewModel(answer)
	pl := rt.Build(t, bankPlan(flightConfig), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	uncachedTogether(ctx1, t, pl, 4)
	assert.Equal(t, 4, model.Calls(), "each request asked the model")
}

// A replayed call's id of its own does not make the next turn miss: the
// key reads the calls' ids as the places of their calls, so a run that
// repeats another (the same question, the same read-only results) is
// answered from the cache turn after turn, whatever ids the calls got.
func TestChatNextTurnAfterAReplayedCallHits(t *testing.T) {
	model := rt.NewModel(rt.CallResponse("call_1", "balance", `{"account":"A"}`), rt.Response{Deltas: []string{"Your balance is 500."}})
	pl := rt.Build(t, bankPlan(""), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	run := func() (first, second runtime.ChatResponse) {
		req := bankRequest()
		first, err := pl.Complete(ctx1, req)
		require.NoError(t, err)
		require.Len(t, first.ToolCalls, 1)
		id := first.ToolCalls[0].ID
		req.Messages = append(req.Messages, runtime.Message{Role: "assistant", ToolCalls: first.ToolCalls},
			runtime.Message{Role: "tool", ToolCallID: id, Content: `{"balance":500}`})
		second, err = pl.Complete(ctx1, req)
		require.NoError(t, err)
		return first, second
	}
	_, second := run()
	assert.False(t, second.Cached)
	first, second := run()
	assert.True(t, first.Cached)
	assert.NotEqual(t, "call_1", first.ToolCalls[0].ID)
	assert.True(t, second.Cached, "the next turn, its call under another id")
	assert.Equal(t, "Your balance is 500.", second.Text)
	assert.Equal(t, 2, model.Calls())
}

// Conversations that differ in more than their calls' ids have keys of
// their own: a result answering another call, another result.
func TestChatKeyReadsCallIDsAsPlaces(t *testing.T) {
	conv := func(ids [2]string, answers [2]string, result string) *runtime.ChatRequest {
		return &runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{
			{Role: "user", Content: "balances of A and B"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: ids[0], Name: "balance", Arguments: []byte(`{"account":"A"}`)},
				{ID: ids[1], Name: "balance", Arguments: []byte(`{"account":"B"}`)}}},
			{Role: "tool", ToolCallID: answers[0], Content: result},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: answers[1], Text: "7"}}},
		}}
	}
	key := func(r *runtime.ChatRequest) string {
		b, err := memoize.ChatKeyInput(r)
		require.NoError(t, err)
		return string(b)
	}
	base := key(conv([2]string{"call_1", "call_2"}, [2]string{"call_1", "call_2"}, "5"))
	assert.Equal(t, base, key(conv([2]string{"toolu_x", "toolu_y"}, [2]string{"toolu_x", "toolu_y"}, "5")), "other ids")
	assert.NotEqual(t, base, key(conv([2]string{"call_1", "call_2"}, [2]string{"call_2", "call_1"}, "5")), "the results answer the other calls")
	assert.NotEqual(t, base, key(conv([2]string{"call_1", "call_2"}, [2]string{"call_1", "call_2"}, "6")), "another result")
	req := conv([2]string{"call_1", "call_2"}, [2]string{"call_1", "call_2"}, "5")
	key(req)
	assert.Equal(t, "call_1", req.Messages[1].ToolCalls[0].ID, "the request is not modified")
	assert.Equal(t, "call_2", req.Messages[3].Parts[0].ToolCallID)
}

// The calls that waited for a leader whose answer is not kept (it calls a
// side-effecting tool) ask the model at once, together: not one after the
// other, each waiting for the one before it to be answered.
func TestSingleFlightWaitersOfAnUnkeptAnswerAskTogether(t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx1, 10*time.Second) // a guard: waiters asking one by one never meet
	defer cancel()
	release, together := make(chan struct{}), make(chan struct{})
	var calls, asking atomic.Int64
	model := runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if calls.Add(1) == 1 {
			<-release // the leader answers once both others wait for it
		} else if asking.Add(1) == 2 {
			close(together)
		}
		if calls.Load() > 1 {
			select {
			case <-together:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_x", Name: "transfer", Arguments: `{"amount":100}`}},
			FinishReason: runtime.FinishToolCalls})
		return nil
	})
	pl := rt.Build(t, bankPlan(flightConfig), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	var joined atomic.Int64
	memoize.OnJoin(pl.Layers(plan.StageChat)[0].Middleware.(*memoize.Memoize), func() {
		if joined.Add(1) == 2 {
			close(release)
		}
	})
	uncachedTogether(ctx, t, pl, 3)
	assert.Equal(t, int64(3), calls.Load())
}

// uncachedTogether makes n identical bank requests to pl at once, each
// answered by the model with one tool call.
func uncachedTogether(ctx context.Context, t *testing.T, pl *runtime.Pipeline, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := pl.Complete(ctx, bankRequest())
			if assert.NoError(t, err) {
				assert.False(t, resp.Cached)
				assert.Len(t, resp.ToolCalls, 1)
			}
		})
	}
	wg.Wait()
}
