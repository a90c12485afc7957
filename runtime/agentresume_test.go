package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// callKey is the key of the record of a call: its arguments are taken as
// a checkpoint writes them.
func callKey(at int, u runtime.ToolUse) string {
	args, err := json.Marshal(u.Arguments)
	if err != nil {
		args = u.Arguments
	}
	sum := sha256.Sum256(args)
	return strconv.Itoa(at) + ":" + u.ID + ":" + hex.EncodeToString(sum[:8])
}

// TestRunAgentSettlesACutShortTurn resumes a run saved while the model's
// three tool calls were under way, the refund's result saved: the refund is
// answered from its record and not run again, the read-only lookup and the
// retry_safe charge run, the results follow the calls in order and the new
// input comes after them. A record of the refund made with other arguments
// (the turn tried again), or a record in doubt (the call ended in doubt, or
// its audit outcome was not written), does not answer it: the refund is
// then in doubt and nothing runs.
func TestRunAgentSettlesACutShortTurn(t *testing.T) {
	lookup, refund, charge := use("l1", "lookup", `{"order":7}`), use("r1", "refund", `{"order":7}`), use("c1", "charge", `{"n":1}`)
	for _, tc := range []struct {
		name     string
		record   string
		recDoubt bool
		inDoubt  bool
	}{
		{name: "saved result", record: callKey(1, refund)},
		{name: "record of other arguments", record: callKey(1, use("r1", "refund", `{"order":8}`)), inDoubt: true},
		{name: "record in doubt", record: callKey(1, refund), recDoubt: true, inDoubt: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			_, err := store.SaveCheckpoint(context.Background(), runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning,
				Transcript: []runtime.Message{{Role: "user", Content: "refund order 7"},
					{Role: "assistant", ToolCalls: []runtime.ToolUse{lookup, refund, charge}}},
				Tools: []runtime.ToolRecord{{Tool: "refund", Call: tc.record, Result: map[string]any{"refunded": 7.0}, InDoubt: tc.recDoubt}}})
			require.NoError(t, err)
			var runs [3]atomic.Int32
			counted := func(i int) runtime.ToolFunc {
				return func(_ context.Context, c *runtime.ToolCall) (any, error) { runs[i].Add(1); return c.Name + " ok", nil }
			}
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"lookup": {}, "refund": {SideEffecting: true}, "charge": {SideEffecting: true, RetrySafe: true}}
			model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
				Tools: map[string]runtime.ToolFunc{"lookup": counted(0), "refund": counted(1), "charge": counted(2)}})
			cp, err := pl.Checkpointer("")
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, err = cp.Resume(ctx, "r")
			require.NoError(t, err)

			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx), Input: "and then?"})
			assert.Equal(t, int32(0), runs[1].Load(), "the refund does not run again")
			if tc.inDoubt {
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Equal(t, "refund", doubt.Tool)
				assert.Zero(t, runs[0].Load()+runs[2].Load(), "nothing runs")
				assert.Zero(t, model.Calls())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int32(1), runs[0].Load())
			assert.Equal(t, int32(1), runs[2].Load())
			sent := model.Requests()[0].Messages
			require.Len(t, sent, 6)
			var got []string
			for _, m := range sent[2:5] {
				got = append(got, m.ToolCallID+"="+m.Parts[0].Text)
			}
			assert.Equal(t, []string{"l1=lookup ok", `r1={"refunded":7}`, "c1=charge ok"}, got)
			assert.Equal(t, runtime.Message{Role: "user", Content: "and then?"}, sent[5])
			assert.Equal(t, "done", res.Output)
			b, _ := json.Marshal(res.Messages)
			assert.Contains(t, string(b), "and then?")
		})
	}
}

// TestRunAgentSettlesCallsBeforeLaterMessages: a transcript whose last
// assistant message has a call without a result, answered in part in the
// Anthropic shape (a user message of tool_result parts) and followed by a
// user's message, has the unanswered call run and its result put after the
// existing one and before the user's message; a refund left so ends the
// turn in doubt and the model is not asked.
func TestRunAgentSettlesCallsBeforeLaterMessages(t *testing.T) {
	l1, l2 := use("l1", "lookup", `{"order":7}`), use("l2", "lookup", `{"order":8}`)
	answered := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "l1", Text: "shipped"}}}
	follow := runtime.Message{Role: "user", Content: "and be quick"}
	var lookups atomic.Int32
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"lookup": {}, "refund": {SideEffecting: true}}
	model := rt.NewModel(rt.Response{Deltas: []string{"done"}}, rt.Response{Deltas: []string{"refunded again"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{
			"lookup": func(context.Context, *runtime.ToolCall) (any, error) { lookups.Add(1); return "in transit", nil },
			"refund": func(context.Context, *runtime.ToolCall) (any, error) { t.Error("the refund ran"); return nil, nil },
		}})
	msgs := []runtime.Message{{Role: "user", Content: "where are 7 and 8?"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{l1, l2}}, answered, follow}
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, int32(1), lookups.Load(), "only the unanswered call runs")
	sent := model.Requests()[0].Messages
	require.Len(t, sent, 5)
	assert.Equal(t, answered, sent[2])
	assert.Equal(t, "tool", sent[3].Role)
	assert.Equal(t, "l2", sent[3].ToolCallID)
	assert.Equal(t, follow, sent[4])
	assert.Equal(t, "done", res.Output)

	msgs = []runtime.Message{{Role: "user", Content: "refund 7"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{use("r1", "refund", `{"order":7}`)}}, follow}
	_, err = pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: msgs, Input: "now"})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, 1, model.Calls(), "the model is not asked after the refund in doubt")
}

// TestRunAgentPendingCallsOfOddIDs: a call is answered only by a result
// naming its id, once per result. A call without an id is not answered by
// a user's message that follows it (whose ToolCallID is empty too), and of
// two calls sharing an id one result answers one, but which is not known:
// the refunds end the turn in doubt and the model is not asked.
func TestRunAgentPendingCallsOfOddIDs(t *testing.T) {
	follow := runtime.Message{Role: "user", Content: "go on"}
	for _, tc := range []struct {
		name string
		msgs []runtime.Message
	}{
		{name: "empty id, user message after", msgs: []runtime.Message{{Role: "user", Content: "refund 7"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{use("", "refund", `{"order":7}`)}}, follow}},
		{name: "duplicate id, one result", msgs: []runtime.Message{{Role: "user", Content: "refund 7 and 8"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{use("c1", "refund", `{"order":7}`), use("c1", "refund", `{"order":8}`)}},
			{Role: "tool", ToolCallID: "c1", Content: "refunded 7"}, follow}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
			model := rt.NewModel(rt.Response{Deltas: []string{"refunded again"}})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{
					"refund": func(context.Context, *runtime.ToolCall) (any, error) { t.Error("the refund ran"); return nil, nil },
				}})
			_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: tc.msgs})
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Zero(t, model.Calls(), "the model is not asked with the refund unanswered")
		})
	}
}

// TestRunAgentPendingCallOfUndeclaredTool: a call left without a result to
// a tool the policy does not declare (settings.allow_undeclared_tools let
// it run, or a reload dropped its declaration) may have had its effect and
// nothing says it is free of one: the turn ends in doubt, the tool does
// not run again and the model is not told the call was refused. A call the
// tool chain refused on entry is recorded, so a turn resumed after it
// answers it from the record and goes on.
func TestRunAgentPendingCallOfUndeclaredTool(t *testing.T) {
	for _, tc := range []struct {
		name  string
		allow bool
	}{{"undeclared tools allowed", true}, {"declaration dropped", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"lookup": {}}
			p.Settings.AllowUndeclaredTools = tc.allow
			model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
			var wipes atomic.Int32
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"wipe": func(context.Context, *runtime.ToolCall) (any, error) {
					wipes.Add(1)
					return "wiped", nil
				}}})
			msgs := []runtime.Message{{Role: "user", Content: "wipe the disk"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{use("w1", "wipe", `{}`)}}}
			_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: msgs})
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Equal(t, "wipe", doubt.Tool)
			assert.Zero(t, wipes.Load(), "the undeclared tool does not run again")
			assert.Zero(t, model.Calls())
		})
	}

	t.Run("refusal recorded", func(t *testing.T) {
		p := rt.Plan(plan.Chains{})
		p.Tools = map[string]plan.Tool{"lookup": {}}
		p.Settings.AllowUndeclaredTools = false
		model := rt.NewModel(
			callTools(use("n1", "nope", `{}`)),
			rt.Response{Err: rt.Permanent("the model went away")},
			rt.Response{Deltas: []string{"sorry"}})
		store := runtime.NewMemoryCheckpoints()
		pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store})
		cp, err := pl.Checkpointer("")
		require.NoError(t, err)
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
		_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "do it"})
		require.Error(t, err)
		// The run is saved with the refusal among its records; resumed
		// from the transcript as it was when the model made the call (a
		// crash during the next model call), the turn answers the call
		// from the record.
		_, err = cp.Save(ctx)
		require.NoError(t, err)
		pl.EndRun("r")
		_, err = cp.Resume(ctx, "r")
		require.NoError(t, err)
		msgs := pl.Transcript(ctx)
		msgs = msgs[:2]
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err)
		assert.Equal(t, "sorry", res.Output)
		sent := model.Requests()[2].Messages
		require.Len(t, sent, 3)
		assert.Equal(t, "n1", sent[2].ToolCallID)
		assert.Contains(t, sent[2].Parts[0].Text, `tool "nope" is not declared`)
		assert.Equal(t, model.Requests()[1].Messages[2], sent[2], "the model is told of the refusal as the live turn told it")
	})
}

// TestRunAgentResumedRefusal: a call a guard refused, answered from its
// record by a resumed turn, is told to the model as the live turn told it
// ("refused: ...", not "the tool failed"); under on_block end_turn the
// resumed turn ends with the block as the live one did. A record saved
// before the class was kept is answered as a failure, as it was.
func TestRunAgentResumedRefusal(t *testing.T) {
	refund := use("r1", "refund", `{"amount":500}`)
	build := func(t *testing.T, model *rt.Model, store runtime.CheckpointStore) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("refund_limit",
			rt.Layer("guard", `{"deny":"args.amount > 100.0","message":"refunds over 100 need an approver"}`))}})
		p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
		return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
			Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "refunded", nil }}})
	}
	for _, onBlock := range []string{runtime.OnBlockTellModel, runtime.OnBlockEndTurn} {
		t.Run(onBlock, func(t *testing.T) {
			model := rt.NewModel(callTools(refund), rt.Response{Err: rt.Permanent("the model went away")}, rt.Response{Deltas: []string{"sorry"}})
			store := runtime.NewMemoryCheckpoints()
			pl := build(t, model, store)
			cp, err := pl.Checkpointer("")
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			live, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 500", OnBlock: onBlock})
			require.Error(t, err)
			require.Len(t, live.Messages, 3)
			told := live.Messages[2]
			require.True(t, strings.HasPrefix(told.Parts[0].Text, "refused: "), told.Parts[0].Text)
			// Saved as it stood before the model was asked again, through
			// the JSON a store keeps.
			_, err = cp.Save(ctx)
			require.NoError(t, err)
			pl.EndRun("r")
			_, err = cp.Resume(ctx, "r")
			require.NoError(t, err)
			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)[:2], OnBlock: onBlock})
			require.GreaterOrEqual(t, len(res.Messages), 3)
			assert.Equal(t, told, res.Messages[2], "the model is told of the refusal as the live turn told it")
			if onBlock == runtime.OnBlockEndTurn {
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b)
				assert.Equal(t, "refund_limit", b.Layer)
				assert.Equal(t, "refunds over 100 need an approver", b.Message)
				assert.Equal(t, 1, model.Calls(), "the turn ends as the live one did, the model not asked again")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "sorry", res.Output)
		})
	}

	t.Run("record saved without its class", func(t *testing.T) {
		var rec runtime.ToolRecord
		require.NoError(t, json.Unmarshal([]byte(`{"tool":"refund","error":"boom","call":"`+callKey(1, refund)+`"}`), &rec))
		store := runtime.NewMemoryCheckpoints()
		_, err := store.SaveCheckpoint(context.Background(), runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning,
			Transcript: []runtime.Message{{Role: "user", Content: "refund 500"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{refund}}},
			Tools:      []runtime.ToolRecord{rec}})
		require.NoError(t, err)
		model := rt.NewModel(rt.Response{Deltas: []string{"sorry"}})
		pl := build(t, model, store)
		cp, err := pl.Checkpointer("")
		require.NoError(t, err)
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
		_, err = cp.Resume(ctx, "r")
		require.NoError(t, err)
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
		require.NoError(t, err)
		assert.Equal(t, "error: the tool failed: boom", res.Messages[2].Parts[0].Text)
		assert.True(t, res.Messages[2].Parts[0].IsError)
	})
}

// TestRunAgentRefusesAnEarlierUnansweredCall: a tool call of an assistant
// message before the last that no result answers before the next
// assistant message (a history providers refuse, of a call nobody knows
// ran) ends the turn before anything runs, naming the message and the
// call, whether the last assistant message made calls or not; a call
// answered in the Anthropic shape (a user message of tool_result parts) is
// answered.
func TestRunAgentRefusesAnEarlierUnansweredCall(t *testing.T) {
	l1, l2 := use("l1", "lookup", `{"order":7}`), use("l2", "lookup", `{"order":8}`)
	answer := func(id string) runtime.Message {
		return runtime.Message{Role: "tool", ToolCallID: id, Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: id, Text: "shipped"}}}
	}
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"lookup": {}}
	var lookups atomic.Int32
	model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"lookup": func(context.Context, *runtime.ToolCall) (any, error) { lookups.Add(1); return "x", nil }}})
	for _, tc := range []struct {
		name string
		msgs []runtime.Message
		err  string
	}{
		{"last answers nothing", []runtime.Message{{Role: "user", Content: "where is 7?"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{l1, l2}}, answer("l2"),
			{Role: "assistant", Content: "7 shipped"}, {Role: "user", Content: "thanks"}},
			`message 1 (assistant) has tool call "l1" (lookup) without a result before message 3`},
		{"last makes calls", []runtime.Message{{Role: "user", Content: "where is 7?"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{l1}}, {Role: "user", Content: "and 8?"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{l2}}},
			`message 1 (assistant) has tool call "l1" (lookup) without a result before message 3`},
		{"answered after the next assistant message", []runtime.Message{{Role: "user", Content: "where is 7?"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{l1}},
			{Role: "assistant", Content: "looking"}, answer("l1")},
			`message 1 (assistant) has tool call "l1" (lookup) without a result before message 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: tc.msgs})
			require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
			assert.ErrorContains(t, err, tc.err)
			assert.Zero(t, model.Calls())
			assert.Zero(t, lookups.Load())
		})
	}

	anthropic := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "l1", Text: "shipped"}}}
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: []runtime.Message{
		{Role: "user", Content: "where is 7?"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{l1}}, anthropic,
		{Role: "assistant", Content: "7 shipped"}}, Input: "thanks"})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Output)
}

// TestRunAgentPendingCallAnsweredAfterResultImages: a user message of tool
// results holds the images a tool returned beside them (a screenshot, an
// image part of the result): it is a message of results, and the answer of
// a call still pending goes after it, not before it, between the call and
// the results that answer the calls made with it.
func TestRunAgentPendingCallAnsweredAfterResultImages(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"lookup": {}}
	model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return "found", nil }}})
	shot := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "s1"},
		{Type: runtime.PartImage, ToolCallID: "s1", ImageURL: "https://example.com/s.png"}}}
	msgs := []runtime.Message{{Role: "user", Content: "look"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{use("s1", "screenshot", `{}`), use("l1", "lookup", `{}`)}}, shot}
	_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, 1, model.Calls())
	sent := model.Requests()[0].Messages
	require.Len(t, sent, 4)
	assert.Equal(t, shot, sent[2], "the results of the screenshot stay next to its call")
	assert.Equal(t, "l1", sent[3].ToolCallID)
}
