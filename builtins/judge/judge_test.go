package judge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	judgepkg "github.com/agentc-dev/agentc/builtins/judge"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestJudge(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		verdict rt.Response
		blocked bool
		cause   bool
	}{
		{"allow", `{"model":"judge"}`, rt.Response{Deltas: []string{"Allow."}}, false, false},
		{"block", `{"model":"judge"}`, rt.Response{Deltas: []string{"BLOCK: leaks a key"}}, true, false},
		{"error fails closed by default", `{"model":"judge"}`, rt.Response{Err: rt.Transient("judge down")}, true, true},
		{"error fails open", `{"model":"judge","on_error":"open"}`, rt.Response{Err: rt.Transient("judge down")}, false, false},
		{"error fails closed", `{"model":"judge","on_error":"closed"}`, rt.Response{Err: rt.Transient("judge down")}, true, true},
		{"no verdict fails closed", `{"model":"judge","on_error":"closed"}`, rt.Response{Deltas: []string{"maybe?"}}, true, true},
		{"timeout fails open", `{"model":"judge","timeout":"20ms","on_error":"open"}`, rt.Response{Delay: time.Second, Deltas: []string{"block"}}, false, false},
		{"timeout fails closed", `{"model":"judge","timeout":"20ms","on_error":"closed"}`, rt.Response{Delay: time.Second, Deltas: []string{"allow"}}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("reviewer", rt.Layer("judge", tt.config))}})
			primary := rt.NewModel(rt.Response{Deltas: []string{"the answer ", "is 42"}})
			judge := rt.NewModel(tt.verdict)
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
			require.NoError(t, err)
			text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
			assert.Equal(t, 1, judge.Calls())
			if !tt.blocked {
				require.NoError(t, err)
				assert.Equal(t, "the answer is 42", text)
				assert.Equal(t, 2, resp.Deltas, "the held deltas are released as they came")
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "reviewer", b.Layer)
			assert.Equal(t, tt.cause, b.Err != nil)
			assert.Empty(t, text, "a blocked response is never delivered")
			assert.Zero(t, resp.Deltas)
		})
	}
}

func TestFailedStreamIsNotJudged(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("judge", `{"model":"judge"}`)}})
	primary := rt.NewModel(rt.Response{Err: rt.Permanent("bad request")})
	judge := rt.NewModel(rt.Response{Deltas: []string{"allow"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	assert.ErrorContains(t, err, "bad request")
	assert.Zero(t, judge.Calls())
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"model":"missing"}`, `{"model":"judge","timeout":"0s"}`, `{"model":"judge","on_error":"x"}`, `{"model":"judge","x":1}`} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("judge", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"judge": rt.NewModel()}})
		assert.Error(t, err, cfg)
	}
}

// TestTheJudgeCallSkipsTheLayersOutside pins that the judge's own model call
// runs below the judge: a meter outside does not charge it and a retry
// outside does not re-invoke it.
func TestTheJudgeCallSkipsTheLayersOutside(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"scope":"global"}`),
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Layer("judge", `{"model":"judge","on_error":"open"}`),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 2}})
	judge := rt.NewModel(rt.Response{Deltas: []string{"allow"}, Usage: runtime.Usage{InputTokens: 1000, OutputTokens: 1}},
		rt.Response{Err: rt.Transient("judge down")})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
	require.NoError(t, err)
	m := pl.Layers(plan.StageChat)[0].Middleware.(runtime.LedgerReader)

	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 10, OutputTokens: 2, USD: m.Ledger("").USD, Calls: 1}, m.Ledger(""),
		"the judge's usage is not in the outer ledger")

	text, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err, "the failed judge call fails open")
	assert.Equal(t, "ok", text)
	assert.Equal(t, 2, judge.Calls(), "the outer retry did not retry the judge call")
	assert.Equal(t, 2, primary.Calls())
}

// TestTheJudgeCallGoesThroughTheLayersInside pins that the judge's own call
// runs through the chain below the judge: a retry inside retries it, a meter
// inside charges it as a call of its own, and the judge does not judge its
// own request.
func TestTheJudgeCallGoesThroughTheLayersInside(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("judge", `{"model":"judge","on_error":"closed"}`),
		rt.Layer("meter", `{"scope":"global"}`),
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 2}})
	judge := rt.NewModel(rt.Response{Err: rt.Transient("judge down")},
		rt.Response{Deltas: []string{"allow"}, Usage: runtime.Usage{InputTokens: 1000, OutputTokens: 1}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
	require.NoError(t, err)
	m := pl.Layers(plan.StageChat)[1].Middleware.(runtime.LedgerReader)

	text, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err, "the retry inside the judge recovered the verdict")
	assert.Equal(t, "ok", text)
	assert.Equal(t, 2, judge.Calls(), "the transient judge failure was retried")
	assert.Equal(t, 1, primary.Calls())
	l := m.Ledger("")
	assert.Equal(t, int64(1010), l.InputTokens, "the ledger holds the response's and the verdict's input")
	assert.Equal(t, int64(3), l.OutputTokens)
	assert.Equal(t, int64(2), l.Calls, "the judge call is a call of its own")
	reqs := judge.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "judge", reqs[1].Model)
	assert.Equal(t, "ok", reqs[1].Messages[1].Content)
	assert.Empty(t, reqs[1].Tools, "the judge's call offers no tools")
}

// A response that acts through a tool call is output too: the judge reads
// the calls (name and arguments) with the text, so a reply that is nothing
// but a transfer to an attacker's account is not judged as an empty one.
func TestTheJudgeReadsTheToolCalls(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("judge", `{"model":"judge"}`)}})
	primary := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "transfer", Arguments: `{"to":"ACCT-666",`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"amount":9000}`}}, FinishReason: runtime.FinishToolCalls},
	}})
	judge := rt.NewModel(rt.Response{Deltas: []string{"block"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
	require.NoError(t, err)
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Zero(t, resp.Deltas, "the blocked tool call is never delivered")
	reqs := judge.Requests()
	require.Len(t, reqs, 1)
	got := reqs[0].Messages[1].Content
	assert.Contains(t, got, "transfer")
	assert.Contains(t, got, `{"to":"ACCT-666","amount":9000}`)
}

// An empty reply (a model that ends its turn with nothing, or with
// whitespace) is judged too, but never sent to the judge as an empty user
// message, which Anthropic's API refuses ("text content blocks must contain
// non-whitespace text"): that would block every empty reply with "the judge
// could not decide".
func TestAnEmptyReplyIsJudgedAsSuch(t *testing.T) {
	for _, reply := range []string{"", " \n\t"} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("judge", `{"model":"judge"}`)}})
		primary := rt.NewModel(rt.Response{Deltas: []string{reply}})
		judge := rt.NewModel(rt.Response{Deltas: []string{"allow"}})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
		require.NoError(t, err)
		text, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
		assert.Equal(t, reply, text, "the reply is delivered as it came")
		msgs := judge.Requests()[0].Messages
		require.Len(t, msgs, 2)
		assert.Equal(t, judgepkg.EmptyReply, msgs[1].Content)
	}
}

// An answer that is no verdict is described, never quoted: the judge read
// the response, and may repeat it, and the error reaches the client and the
// access log, which carry no prompt or response text.
func TestAnAnswerThatIsNoVerdictIsNotQuoted(t *testing.T) {
	for _, tt := range []struct{ answer, kind string }{
		{"Reasoning: the reply says The admin pass is hunter2, so", "a text answer of 55 bytes"},
		{`{"verdict": "the admin pass is hunter2"}`, "a JSON answer of 40 bytes"},
		{"  ", "an empty answer"},
	} {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Named("reviewer", rt.Layer("judge", `{"model":"judge"}`))}})
		primary := rt.NewModel(rt.Response{Deltas: []string{"The admin pass is hunter2"}})
		judge := rt.NewModel(rt.Response{Deltas: []string{tt.answer}})
		pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge}})
		_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		require.Error(t, b.Err)
		assert.NotContains(t, err.Error(), "hunter2")
		assert.NotContains(t, b.Err.Error(), "admin")
		assert.NotContains(t, b.Err.Error(), "Reasoning")
		assert.Contains(t, b.Err.Error(), "neither allow nor block")
		assert.Contains(t, b.Err.Error(), tt.kind)
	}
}
