package semanticmemoize_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func bankPipeline(t *testing.T, model *rt.Model) *runtime.Pipeline {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"scope": "global"}`)}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true}, "balance": {}}
	return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
}

func ask(t *testing.T, pl *runtime.Pipeline, msgs ...runtime.Message) runtime.ChatResponse {
	t.Helper()
	resp, err := pl.Complete(ctx1, runtime.ChatRequest{Model: "primary", Messages: msgs, Tools: []runtime.ToolDef{{Name: "transfer"}, {Name: "balance"}}})
	require.NoError(t, err)
	return resp
}

func user(s string) runtime.Message { return runtime.Message{Role: "user", Content: s} }

// An answer that calls a tool is never reused for a near-duplicate
// request: the call the model proposed for "transfer 100 EUR" would run
// again for "transfer 900 EUR" (a read-only call for another account would
// read that account). The model is asked.
func TestChatAnswerCallingAToolIsNotReused(t *testing.T) {
	for _, tool := range []string{"transfer", "balance"} {
		t.Run(tool, func(t *testing.T) {
			model := rt.NewModel(rt.CallResponse("call_1", tool, `{"amount":100}`), rt.CallResponse("call_2", tool, `{"amount":900}`))
			pl := bankPipeline(t, model)
			ask(t, pl, user("Please transfer 100 EUR from my checking account to my landlord, account DE89370400440532013000, for the rent of March."))
			resp := ask(t, pl, user("Please transfer 900 EUR from my checking account to my landlord, account DE89370400440532013000, for the rent of March."))
			assert.False(t, resp.Cached)
			assert.Equal(t, 2, model.Calls(), "the model is asked for the 900")
			require.Len(t, resp.ToolCalls, 1)
			assert.Equal(t, "call_2", resp.ToolCalls[0].ID)
			assert.JSONEq(t, `{"amount":900}`, string(resp.ToolCalls[0].Arguments))
		})
	}
}

// A conversation holding tool calls and results is neither looked up nor
// stored: the answer reports on the result ("Done: 100 EUR sent."), and a
// near-duplicate conversation holds another.
func TestChatConversationWithToolResultsBypasses(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"Done: 100 EUR sent."}}, rt.Response{Deltas: []string{"Done: 900 EUR sent."}},
		rt.Response{Deltas: []string{"Done: 900 EUR sent, again."}})
	pl := bankPipeline(t, model)
	turn := func(amount string, result runtime.Message) runtime.ChatResponse {
		return ask(t, pl, user("Please transfer "+amount+" EUR to my landlord, account DE89370400440532013000, for the rent of March."),
			runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "transfer", Arguments: []byte(`{"amount":` + amount + `}`)}}},
			result)
	}
	toolMsg := runtime.Message{Role: "tool", ToolCallID: "call_1", Content: `{"ok":true}`}
	assert.Equal(t, "Done: 100 EUR sent.", turn("100", toolMsg).Text)
	assert.Equal(t, "Done: 900 EUR sent.", turn("900", toolMsg).Text)
	part := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_1", Text: `{"ok":true}`}}}
	resp := turn("900", part)
	assert.False(t, resp.Cached, "a tool result as a part of a user message")
	assert.Equal(t, 3, model.Calls())
}

// Plain conversations still reuse plain answers.
func TestChatPlainAnswerStillReused(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"30 days"}})
	pl := bankPipeline(t, model)
	ask(t, pl, user("What is the refund window?"))
	resp := ask(t, pl, user("what is the refund window"))
	assert.True(t, resp.Cached)
	assert.Equal(t, "30 days", resp.Text)
	assert.Equal(t, 1, model.Calls())
}
