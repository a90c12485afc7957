package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func ptr[T any](v T) *T { return &v }

// fullRequest sets every field of the call model.
func fullRequest() runtime.ChatRequest {
	return runtime.ChatRequest{
		Model: "primary",
		Messages: []runtime.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Parts: []runtime.ContentPart{
				{Type: runtime.PartText, Text: "what is this?"},
				{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
				{Type: runtime.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
			}},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{
				{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q":"png"}`)},
			}},
			{Role: "tool", ToolCallID: "call_1", Name: "search", Content: "a PNG image"},
			{Role: "user", Parts: []runtime.ContentPart{
				{Type: runtime.PartToolResult, ToolCallID: "call_2", Text: "timeout", IsError: true},
			}},
		},
		MaxTokens:   256,
		Tools:       []runtime.ToolDef{{Name: "search", Description: "searches", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice:  "auto",
		Temperature: ptr(0.2),
		TopP:        ptr(0.9),
		Stop:        []string{"END"},
		Seed:        ptr(int64(7)),
		ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "answer",
			Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
		Metadata: map[string]string{"user": "u1"},
	}
}

func TestCallModelJSONRoundTrip(t *testing.T) {
	req := fullRequest()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	var back runtime.ChatRequest
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, req, back)

	d := runtime.Delta{Text: "x", ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "c", Name: "n", Arguments: `{"a`}},
		FinishReason: runtime.FinishToolCalls,
		Usage:        runtime.Usage{InputTokens: 10, OutputTokens: 5, CachedInputTokens: 4, ReasoningTokens: 2}}
	b, err = json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"x","tool_calls":[{"index":1,"id":"c","name":"n","arguments":"{\"a"}],
		"finish_reason":"tool_calls","usage":{"input_tokens":10,"output_tokens":5,"cached_input_tokens":4,"reasoning_tokens":2}}`, string(b))
	var backDelta runtime.Delta
	require.NoError(t, json.Unmarshal(b, &backDelta))
	assert.Equal(t, d, backDelta)

	resp := runtime.ChatResponse{Text: "t", Model: "primary", FinishReason: runtime.FinishStop, Attempts: 1, Deltas: 2,
		ToolCalls: []runtime.ToolUse{{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":1}`)}}}
	b, err = json.Marshal(resp)
	require.NoError(t, err)
	var backResp runtime.ChatResponse
	require.NoError(t, json.Unmarshal(b, &backResp))
	assert.Equal(t, resp, backResp)
}

// TestCallModelWireNames pins the JSON names the plan, scenarios and hosts
// read.
func TestCallModelWireNames(t *testing.T) {
	b, err := json.Marshal(fullRequest())
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"primary","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","parts":[{"type":"text","text":"what is this?"},{"type":"image","image_url":"https://example.com/a.png"},
			{"type":"image","media_type":"image/png","data":"iVBORw=="}]},
		{"role":"assistant","tool_calls":[{"id":"call_1","name":"search","arguments":{"q":"png"}}]},
		{"role":"tool","tool_call_id":"call_1","name":"search","content":"a PNG image"},
		{"role":"user","parts":[{"type":"tool_result","tool_call_id":"call_2","text":"timeout","is_error":true}]}],
		"max_tokens":256,"tools":[{"name":"search","description":"searches","parameters":{"type":"object"}}],
		"tool_choice":"auto","temperature":0.2,"top_p":0.9,"stop":["END"],"seed":7,
		"response_format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true},
		"metadata":{"user":"u1"}}`, string(b))

	b, err = json.Marshal(runtime.ChatRequest{Model: "m", Messages: hi})
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, string(b), "unset fields stay out")
}

func TestToolCallBuilder(t *testing.T) {
	var b runtime.ToolCallBuilder
	assert.Nil(t, b.ToolCalls(), "no fragment, no calls")
	for _, d := range []runtime.Delta{
		{Text: "let me look"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "b", Name: "fetch"}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "a", Name: "search", Arguments: `{"q":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"go"}`}, {Index: 1, Arguments: `{"url":"h"}`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 2, ID: "c", Name: "now"}}},
	} {
		b.Add(&d)
	}
	assert.Equal(t, 3, b.Len())
	assert.Equal(t, []runtime.ToolUse{
		{ID: "a", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)},
		{ID: "b", Name: "fetch", Arguments: json.RawMessage(`{"url":"h"}`)},
		{ID: "c", Name: "now", Arguments: json.RawMessage(`{}`)},
	}, b.ToolCalls(), "ordered by index; a call without arguments has {}")

	calls := b.ToolCalls()
	var again runtime.ToolCallBuilder
	again.Add(&runtime.Delta{ToolCalls: runtime.ToolCallDeltas(calls)})
	assert.Equal(t, calls, again.ToolCalls(), "whole calls stream back as one fragment each")
	b.Reset()
	assert.Zero(t, b.Len())
}

// A name streamed in pieces is the pieces joined, as an OpenAI client
// library assembles it (its accumulator appends function.name); the call's
// id is the last one sent, as there.
func TestToolCallBuilderJoinsANameSplitOverFragments(t *testing.T) {
	var b runtime.ToolCallBuilder
	for _, d := range []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "delete_"}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Name: "all_", Arguments: `{"path":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Name: "files", Arguments: `"/"}`}}},
	} {
		b.Add(&d)
	}
	assert.Equal(t, []runtime.ToolUse{{ID: "call_1", Name: "delete_all_files", Arguments: json.RawMessage(`{"path":"/"}`)}}, b.ToolCalls())

	b.Reset()
	for range 3 { // a server that names the call in every fragment
		b.AddFragment(runtime.ToolCallDelta{Index: 0, Name: "get_weather", Arguments: "{}"[:1]})
	}
	b.AddFragment(runtime.ToolCallDelta{Index: 0, Arguments: "}"})
	assert.Equal(t, "get_weather", b.ToolCalls()[0].Name, "a repeated whole name is read once")
}

func TestToolUseArgs(t *testing.T) {
	args, err := runtime.ToolUse{ID: "a", Name: "s", Arguments: json.RawMessage(`{"q":"go","n":2}`)}.Args()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"q": "go", "n": 2.0}, args)

	args, err = runtime.ToolUse{ID: "a", Name: "s"}.Args()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, args)

	for _, bad := range []string{`[1]`, `null`, `{"q":`} {
		_, err := runtime.ToolUse{ID: "call_9", Name: "search", Arguments: json.RawMessage(bad)}.Request()
		assert.ErrorContains(t, err, `tool call "call_9" (search): arguments are not a JSON object`, bad)
	}
	r, err := runtime.ToolUse{ID: "a", Name: "s", Arguments: json.RawMessage(`{"q":"go"}`)}.Request()
	require.NoError(t, err)
	assert.Equal(t, runtime.ToolRequest{Name: "s", Args: map[string]any{"q": "go"}}, r)
}

// toolCallStream is a model turn that says a word, then calls two tools in
// parallel, their arguments in fragments, and reports cached tokens.
var toolCallStream = []runtime.Delta{
	{Text: "checking"},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_a", Name: "search", Arguments: `{"q":`}}},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "call_b", Name: "now"}}},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"go"}`}}},
	{FinishReason: runtime.FinishToolCalls, Usage: runtime.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 60, ReasoningTokens: 5}},
}

func TestResponsesCarryToolCallsAndFinishReason(t *testing.T) {
	want := []runtime.ToolUse{
		{ID: "call_a", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)},
		{ID: "call_b", Name: "now", Arguments: json.RawMessage(`{}`)},
	}
	wantUsage := runtime.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 60, ReasoningTokens: 5}
	model := rt.NewModel(rt.Response{Stream: toolCallStream})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("retry", fastRetry)}}, map[string]runtime.ModelClient{"primary": model})
	req := runtime.ChatRequest{Model: "primary", Messages: hi}

	resp, err := pl.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, "checking", resp.Text)
	assert.Equal(t, want, resp.ToolCalls)
	assert.Equal(t, runtime.FinishToolCalls, resp.FinishReason)
	assert.Equal(t, wantUsage, resp.Usage)
	assert.Equal(t, 5, resp.Deltas)

	s := pl.Chat(context.Background(), req)
	n := 0
	for _, err := range s.All() {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 5, n)
	assert.Equal(t, want, s.Response().ToolCalls)
	assert.Equal(t, runtime.FinishToolCalls, s.Response().FinishReason)

	resp, err = pl.Stream(context.Background(), req, func(runtime.Delta) bool { return true })
	require.NoError(t, err)
	assert.Nil(t, resp.ToolCalls, "Stream leaves assembling to its caller, as with Text")
	assert.Equal(t, runtime.FinishToolCalls, resp.FinishReason)
	assert.Equal(t, wantUsage, resp.Usage)
}

func TestRetryCommitsOnAToolCallFragment(t *testing.T) {
	model := rt.NewModel(
		rt.Response{Stream: toolCallStream, Err: rt.Transient("reset"), FailAfter: 2},
		rt.Response{Deltas: []string{"never"}},
	)
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("retry", fastRetry)}}, map[string]runtime.ModelClient{"primary": model})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
	require.ErrorContains(t, err, "reset")
	assert.Equal(t, 1, model.Calls(), "a failure after a tool-call fragment is mid-stream")
	assert.Equal(t, []runtime.ToolUse{{ID: "call_a", Name: "search", Arguments: json.RawMessage(`{"q":`)}}, resp.ToolCalls,
		"what arrived is returned as it arrived")
}

func TestEstimatesCountPartsAndToolCalls(t *testing.T) {
	plain := runtime.EstimateMessages([]runtime.Message{{Role: "user", Content: "hi"}})
	withParts := runtime.EstimateMessages([]runtime.Message{{Role: "user", Content: "hi", Parts: []runtime.ContentPart{
		{Type: runtime.PartText, Text: "12345678"},
		{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
	}}})
	assert.Equal(t, plain+runtime.EstimateTokens("12345678")+runtime.MaxImageTokens, withParts, "a text part counts its text, an image known by its URL the most an image may cost")
	withCall := runtime.EstimateMessages([]runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{
		{ID: "a", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)}}}})
	assert.Equal(t, 4+runtime.EstimateTokens("search")+runtime.EstimateTokens(`{"q":"go"}`), withCall)

	// A stream without a usage report is charged for the arguments too.
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "a", Name: "search", Arguments: `{"q":"a longer query"}`}}}}})
	pl := build(t, plan.Chains{}, map[string]runtime.ModelClient{"primary": model})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
	require.NoError(t, err)
	// The name and the arguments are estimated in quarter tokens together:
	// "search" 6 quarters (a word of six letters), the arguments 49 (seven
	// punctuation marks, three words, two spaces).
	assert.Equal(t, runtime.Usage{InputTokens: runtime.EstimateMessages(hi), OutputTokens: (6 + 49 + 3) / 4}, resp.Usage)
}

func TestBufferAssemblesToolCalls(t *testing.T) {
	c := &runtime.ChatCall{}
	next := func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, d := range toolCallStream {
			if !c.Emit(yield, d) {
				return nil
			}
		}
		return nil
	}
	b, err := runtime.Buffer(context.Background(), c, next)
	require.NoError(t, err)
	assert.Equal(t, "checking", b.Text)
	assert.Len(t, b.ToolCalls, 2)
	assert.Equal(t, runtime.FinishToolCalls, c.FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 60, ReasoningTokens: 5}, b.Usage())
}

// TestTextDeltasDoNotAllocate pins the per-delta cost: a long text stream
// through the resilience chain allocates what a one-delta stream does.
func TestTextDeltasDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	pl := resilience(t, manyDeltas)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	req := runtime.ChatRequest{Model: "primary", Messages: hi}
	yield := func(runtime.Delta) bool { return true }
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := pl.Stream(ctx, req, yield); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0, "65 deltas cost the one model-facing yield")
}

func TestDeclaredToolsAreOfferedByDefault(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{
		"search": {Description: "searches the web", Args: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		"now":    {},
	}
	want := []runtime.ToolDef{
		{Name: "now", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "search", Description: "searches the web", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
	}
	assert.Equal(t, want, runtime.DeclaredTools(p))

	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	deps := runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}}
	pl := rt.Build(t, p, deps)
	assert.Equal(t, want, pl.DeclaredTools())
	own := []runtime.ToolDef{{Name: "mine"}}
	for _, tools := range [][]runtime.ToolDef{nil, {}, own} {
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi, Tools: tools})
		require.NoError(t, err)
	}
	reqs := model.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, want, reqs[0].Tools, "a request without tools offers the declared ones")
	assert.Equal(t, []runtime.ToolDef{}, reqs[1].Tools, "an empty list offers none")
	assert.Equal(t, own, reqs[2].Tools, "the request's own tools win")

	deps.NoDeclaredTools = true
	pl = rt.Build(t, p, deps)
	assert.Nil(t, pl.DeclaredTools())
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
	require.NoError(t, err)
	assert.Nil(t, model.Requests()[3].Tools, "the host opted out")
}

func TestMessageTextAndLatestInput(t *testing.T) {
	m := runtime.Message{Role: "user", Content: "a", Parts: []runtime.ContentPart{
		{Type: runtime.PartText, Text: "b"}, {Type: runtime.PartImage, ImageURL: "u"},
		{Type: runtime.PartToolResult, ToolCallID: "c", Text: "r"}, {Type: runtime.PartText, Text: "d"}}}
	assert.Equal(t, "a\nb\nd", m.Text())
	assert.Equal(t, []string{"r"}, m.ToolResults())
	tool := runtime.Message{Role: "tool", Content: "out"}
	assert.Equal(t, []string{"out"}, tool.ToolResults())

	msgs := []runtime.Message{{Role: "user", Content: "1"}, {Role: "assistant"}, {Role: "tool"}, {Role: "user"}}
	assert.Equal(t, msgs[2:], runtime.LatestInput(msgs))
	assert.Equal(t, msgs[:1], runtime.LatestInput(msgs[:1]))

	assert.Equal(t, "q\nfoo\nn", runtime.ToolUse{Arguments: json.RawMessage(`{"q":"f\u006fo","n":[1,true]}`)}.ArgsText())
	assert.Equal(t, `{"q":`, runtime.ToolUse{Arguments: json.RawMessage(`{"q":`)}.ArgsText(), "not JSON: the raw text")
}

func TestHoldToolCalls(t *testing.T) {
	next := func(fail error) runtime.ChatHandler {
		return func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
			for _, d := range toolCallStream {
				if !c.Emit(yield, d) {
					return nil
				}
			}
			return fail
		}
	}
	upper := func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
		calls[0].Arguments = json.RawMessage(`{"q":"GO"}`)
		return calls, nil
	}
	c := &runtime.ChatCall{}
	var got []runtime.Delta
	err := runtime.HoldToolCalls(context.Background(), c, next(nil), func(d runtime.Delta) bool { got = append(got, d); return true }, upper)
	require.NoError(t, err)
	require.Len(t, got, 2, "the text at once, the calls in one delta at the end")
	assert.Equal(t, "checking", got[0].Text)
	assert.Equal(t, []runtime.ToolCallDelta{{Index: 0, ID: "call_a", Name: "search", Arguments: `{"q":"GO"}`}, {Index: 1, ID: "call_b", Name: "now", Arguments: `{}`}},
		got[1].ToolCalls)
	assert.Equal(t, runtime.FinishToolCalls, got[1].FinishReason)
	assert.Equal(t, int64(100), got[1].Usage.InputTokens, "usage held with the calls rides on them")
	assert.Equal(t, 2, c.Deltas)

	c = &runtime.ChatCall{}
	got = nil
	err = runtime.HoldToolCalls(context.Background(), c, next(errors.New("reset")), func(d runtime.Delta) bool { got = append(got, d); return true }, upper)
	require.ErrorContains(t, err, "reset")
	assert.Len(t, got, 1, "a failed stream's held calls are dropped")
	assert.Equal(t, 1, c.Deltas)

	c = &runtime.ChatCall{}
	refuse := func([]runtime.ToolUse) ([]runtime.ToolUse, error) { return nil, errors.New("refused") }
	err = runtime.HoldToolCalls(context.Background(), c, next(nil), func(runtime.Delta) bool { return true }, refuse)
	require.ErrorContains(t, err, "refused")
	assert.Equal(t, 1, c.Deltas)
}

// TestFirstDeltaCommitCountsToolCallsAndFinish: a tool-call fragment, and a
// delta carrying only a finish reason, commit fallback and hedge as text
// does.
func TestFirstDeltaCommitCountsToolCallsAndFinish(t *testing.T) {
	fragment := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c", Name: "search", Arguments: `{"q":`}}}, {Text: "never"}}
	finishOnly := []runtime.Delta{{FinishReason: runtime.FinishStop}, {Text: "never"}}
	for name, stream := range map[string][]runtime.Delta{"tool-call fragment": fragment, "finish only": finishOnly} {
		t.Run(name, func(t *testing.T) {
			primary := rt.NewModel(rt.Response{Stream: stream, Err: rt.Transient("reset"), FailAfter: 1})
			backup := rt.NewModel(rt.Response{Deltas: []string{"from backup"}})
			models := map[string]runtime.ModelClient{"primary": primary, "backup": backup}
			pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}}, models)
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
			require.ErrorContains(t, err, "reset")
			assert.Zero(t, backup.Calls(), "fallback is committed to primary")
			assert.Equal(t, 1, resp.Deltas)

			hedged := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1h"}`)}}, models)
			resp, err = hedged.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
			require.ErrorContains(t, err, "reset", "the first delta won the race: its failure is the call's")
			assert.Equal(t, "primary", resp.Model)
			assert.Zero(t, backup.Calls())
		})
	}

	// The winner's tool calls and finish reason reach the caller.
	primary := rt.NewModel(rt.Response{Stream: toolCallStream})
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1h"}`)}},
		map[string]runtime.ModelClient{"primary": primary, "backup": primary})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: hi})
	require.NoError(t, err)
	assert.Len(t, resp.ToolCalls, 2)
	assert.Equal(t, runtime.FinishToolCalls, resp.FinishReason)
	assert.Equal(t, int64(60), resp.Usage.CachedInputTokens, "the clone's usage is adopted whole")
}

// TestToolCallBuilderCustomCall: the fragments of a custom tool's call
// carry its text; the call's arguments are {"input": TEXT}, and it
// streams back whole as its text.
func TestToolCallBuilderCustomCall(t *testing.T) {
	var b runtime.ToolCallBuilder
	b.Add(&runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "apply_patch", Arguments: `*** Begin "`, Custom: true}}})
	b.Add(&runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `Patch"`}}})
	calls := b.ToolCalls()
	require.Len(t, calls, 1)
	assert.True(t, calls[0].Custom)
	assert.JSONEq(t, `{"input": "*** Begin \"Patch\""}`, string(calls[0].Arguments))
	in, err := calls[0].CustomInput()
	require.NoError(t, err)
	assert.Equal(t, `*** Begin "Patch"`, in)
	req, err := calls[0].Request()
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"input": `*** Begin "Patch"`}, req.Args, "the tool chain reads the text as args.input")

	whole := runtime.ToolCallDeltas(calls)
	assert.Equal(t, []runtime.ToolCallDelta{{Index: 0, ID: "call_1", Name: "apply_patch", Arguments: `*** Begin "Patch"`, Custom: true}}, whole)
	var again runtime.ToolCallBuilder
	again.Add(&runtime.Delta{ToolCalls: whole})
	assert.Equal(t, calls, again.ToolCalls())

	for _, args := range []string{`{"input": 5}`, `{"input": "a", "more": "b"}`, `{}`, `"text"`} {
		_, err := runtime.ToolUse{ID: "c", Name: "apply_patch", Arguments: json.RawMessage(args), Custom: true}.CustomInput()
		assert.ErrorContains(t, err, `holds its text as the arguments {"input": TEXT}`, args)
	}
}
