package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oaCallsSSE is an OpenAI stream whose answer is some text, then n calls
// of name with args, each in one fragment: a stream refused at its calls
// has started.
func oaCallsSSE(n int, name, args string) string {
	return oaCallListSSE(slices.Repeat([]callOf{{name, args}}, n)...)
}

// callOf is a call a replayed answer makes: its tool and its arguments.
type callOf struct{ name, args string }

// oaCallListSSE is an OpenAI stream whose answer is some text, then
// calls, each in one fragment, ids call_1, call_2...
func oaCallListSSE(calls ...callOf) string {
	return oaIDCallsSSE(numbered("call_", calls)...)
}

// idCall is a call a replayed answer makes under the id it gives ("":
// none).
type idCall struct{ id, name, args string }

// numbered gives calls the ids prefix1, prefix2...
func numbered(prefix string, calls []callOf) []idCall {
	out := make([]idCall, len(calls))
	for i, c := range calls {
		out[i] = idCall{prefix + strconv.Itoa(i+1), c.name, c.args}
	}
	return out
}

// oaIDCallsSSE is an OpenAI stream whose answer is some text, then calls,
// each in one fragment under its id (none when blank).
func oaIDCallsSSE(calls ...idCall) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	out := chunk(`{"role":"assistant","content":"Let me check."}`, "null")
	for i, c := range calls {
		id := ""
		if c.id != "" {
			id = `"id":` + q(c.id) + `,`
		}
		out += chunk(`{"tool_calls":[{"index":`+strconv.Itoa(i)+`,`+id+`"type":"function","function":{"name":`+q(c.name)+`,"arguments":`+q(c.args)+`}}]}`, "null")
	}
	return out + chunk(`{}`, `"tool_calls"`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
}

// anCallsSSE is an Anthropic stream whose answer is some text, then n
// tool_use blocks of name with args.
func anCallsSSE(n int, name, args string) string {
	return anCallListSSE(slices.Repeat([]callOf{{name, args}}, n)...)
}

// anCallListSSE is an Anthropic stream whose answer is some text, then
// calls as tool_use blocks, ids toolu_1, toolu_2...
func anCallListSSE(calls ...callOf) string {
	return anIDCallsSSE(numbered("toolu_", calls)...)
}

// anIDCallsSSE is an Anthropic stream whose answer is some text, then
// calls as tool_use blocks under their ids.
func anIDCallsSSE(calls ...idCall) string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	out := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	out += ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	for i, c := range calls {
		at := strconv.Itoa(i + 1)
		out += ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"tool_use","id":`+q(c.id)+`,"name":`+q(c.name)+`,"input":{}}}`) +
			ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"input_json_delta","partial_json":`+q(c.args)+`}}`) +
			ev("content_block_stop", `{"type":"content_block_stop","index":`+at+`}`)
	}
	return out + ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

// choiceAsk is a request offering get_weather and refund under a tool
// choice: "" (none sent), none, required or the name of the tool forced;
// serial sends parallel_tool_calls false (Anthropic's
// disable_parallel_tool_use true); tools, when set, are offered instead.
type choiceAsk struct {
	choice string
	serial bool
	tools  []string
}

// answer is what one route relayed: the error, the names and ids of the
// calls the client got and, streamed, the text it got.
type answer struct {
	route string
	err   error
	calls []string
	ids   []string
	text  string
}

// ask sends the request on each route, whole and streamed, through the
// official clients: the two chat routes to model primary (OpenAI), the
// messages route to backup (Anthropic).
func (c choiceAsk) ask(t *testing.T, g *gateway) []answer {
	t.Helper()
	ctx := context.Background()
	var out []answer
	tools := c.tools
	if tools == nil {
		tools = []string{"get_weather", "refund"}
	}

	chat := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}}
	for _, name := range tools {
		chat.Tools = append(chat.Tools, proposalTool(name))
	}
	switch c.choice {
	case "":
	case "none", "required":
		chat.ToolChoice.OfAuto = openai.String(c.choice)
	default:
		chat.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: c.choice}}
	}
	if c.serial {
		chat.ParallelToolCalls = openai.Bool(false)
	}
	cc, err := g.openai(t).Chat.Completions.New(ctx, chat)
	a := answer{route: "chat", err: err}
	if err == nil {
		for _, tc := range cc.Choices[0].Message.ToolCalls {
			a.calls, a.ids = append(a.calls, tc.Function.Name), append(a.ids, tc.ID)
		}
	}
	out = append(out, a)
	cs := g.openai(t).Chat.Completions.NewStreaming(ctx, chat)
	var cacc openai.ChatCompletionAccumulator
	for cs.Next() {
		cacc.AddChunk(cs.Current())
	}
	a = answer{route: "chat stream", err: cs.Err()}
	for _, ch := range cacc.Choices {
		a.text += ch.Message.Content
		for _, tc := range ch.Message.ToolCalls {
			a.calls, a.ids = append(a.calls, tc.Function.Name), append(a.ids, tc.ID)
		}
	}
	out = append(out, a)

	rs := responses.ResponseNewParams{Model: "primary", Input: rsText("go")}
	for _, name := range tools {
		rs.Tools = append(rs.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name,
			Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}})
	}
	switch c.choice {
	case "":
	case "none", "required":
		rs.ToolChoice.OfToolChoiceMode = openai.Opt(responses.ToolChoiceOptions(c.choice))
	default:
		rs.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: c.choice}
	}
	if c.serial {
		rs.ParallelToolCalls = openai.Bool(false)
	}
	r, err := g.openai(t).Responses.New(ctx, rs)
	a = answer{route: "responses", err: err}
	if err == nil {
		a.calls, a.ids = rsCalls(r.Output)
	}
	out = append(out, a)
	racc, _, err := rsStream(t, g.openai(t).Responses.NewStreaming(ctx, rs))
	a = answer{route: "responses stream", err: err, text: racc.Snapshot().OutputText()}
	for _, item := range racc.Snapshot().Output {
		if item.Type == "function_call" {
			a.calls, a.ids = append(a.calls, item.Name), append(a.ids, item.CallID)
		}
	}
	out = append(out, a)

	msg := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))}}
	for _, name := range tools {
		msg.Tools = append(msg.Tools, anProposalTool(name))
	}
	var serial = anthropic.Bool(c.serial)
	switch c.choice {
	case "":
		if c.serial {
			msg.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: serial}
		}
	case "none":
		msg.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	case "required":
		msg.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: serial}
	default:
		msg.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: c.choice, DisableParallelToolUse: serial}
	}
	m, err := g.anthropic(t).Messages.New(ctx, msg)
	a = answer{route: "messages", err: err}
	if err == nil {
		a.calls, a.ids = anCalls(m.Content)
	}
	out = append(out, a)
	as := g.anthropic(t).Messages.NewStreaming(ctx, msg)
	var macc anthropic.Message
	for as.Next() {
		require.NoError(t, macc.Accumulate(as.Current()))
	}
	a = answer{route: "messages stream", err: as.Err()}
	a.calls, a.ids = anCalls(macc.Content)
	for _, b := range macc.Content {
		a.text += b.Text
	}
	return append(out, a)
}

// rsCalls returns the names and the call ids of the function calls among
// a response's output items.
func rsCalls(items []responses.ResponseOutputItemUnion) (names, ids []string) {
	for _, item := range items {
		if item.Type == "function_call" {
			names, ids = append(names, item.Name), append(ids, item.CallID)
		}
	}
	return names, ids
}

// anCalls returns the names and ids of the tool_use blocks among a
// message's.
func anCalls(blocks []anthropic.ContentBlockUnion) (names, ids []string) {
	for _, b := range blocks {
		if b.Type == "tool_use" {
			names, ids = append(names, b.Name), append(ids, b.ID)
		}
	}
	return names, ids
}

// choiceGateway is a gateway whose models answer each of the six
// requests of choiceAsk.ask with n calls of name with args.
func choiceGateway(t *testing.T, n int, name, args string) *gateway {
	return callsGateway(t, proposalDecls, slices.Repeat([]callOf{{name, args}}, n)...)
}

// callsGateway is a gateway of the tools decls whose models answer each
// of the six requests of choiceAsk.ask with calls.
func callsGateway(t *testing.T, decls string, calls ...callOf) *gateway {
	return idCallsGateway(t, decls, numbered("call_", calls), numbered("toolu_", calls))
}

// idCallsGateway is a gateway of the tools decls whose OpenAI model
// answers each of the four requests of choiceAsk.ask for it with oa, and
// whose Anthropic model each of the two others with an.
func idCallsGateway(t *testing.T, decls string, oa, an []idCall, opts ...func(*Options)) *gateway {
	oaReplies, anReplies := make([]reply, 4), make([]reply, 2)
	for i := range oaReplies {
		oaReplies[i] = reply{body: oaIDCallsSSE(oa...)}
	}
	for i := range anReplies {
		anReplies[i] = reply{body: anIDCallsSSE(an...)}
	}
	return newGatewayWith(t, decls, typicalChain, oaReplies, anReplies, opts...)
}

// assertRefused asserts that each answer is a refusal by layer tools
// whose message holds want, with no call relayed: a 403 in the route's
// error format for a whole answer; for a stream, the text before the
// calls, then an error event.
func assertRefused(t *testing.T, answers []answer, want string) {
	t.Helper()
	assertFailed(t, answers, http.StatusForbidden, "tools", want)
}

// assertFailed asserts that each answer failed with a message that holds
// want, no call relayed: status in the route's error format, naming layer
// (when not ""), for a whole answer; for a stream, the text before the
// calls, then an error event.
func assertFailed(t *testing.T, answers []answer, wholeStatus int, layer, want string) {
	t.Helper()
	require.Len(t, answers, 6)
	for _, a := range answers {
		assert.Empty(t, a.calls, "%s: no call is relayed", a.route)
		if !assert.Error(t, a.err, a.route) {
			continue
		}
		status := wholeStatus
		if strings.HasSuffix(a.route, "stream") {
			assert.Equal(t, "Let me check.", a.text, "%s: the text before the calls streams", a.route)
			status = http.StatusOK
		}
		var oerr *openai.Error
		var aerr *anthropic.Error
		switch {
		case errors.As(a.err, &oerr):
			assert.Equal(t, status, oerr.StatusCode, a.route)
			if layer != "" {
				assert.Contains(t, oerr.RawJSON(), `"layer":"`+layer+`"`, a.route)
			}
			assert.Contains(t, oerr.Message, want, a.route)
		case errors.As(a.err, &aerr):
			assert.Equal(t, status, aerr.StatusCode, a.route)
			if layer != "" {
				assert.Contains(t, aerr.RawJSON(), `"layer":"`+layer+`"`, a.route)
			}
			assert.Contains(t, aerr.RawJSON(), want, a.route)
		default:
			assert.Contains(t, a.err.Error(), want, a.route)
		}
	}
}

// assertRelayed asserts that each answer relayed calls.
func assertRelayed(t *testing.T, answers []answer, calls ...string) {
	t.Helper()
	require.Len(t, answers, 6)
	for _, a := range answers {
		assert.NoError(t, a.err, a.route)
		assert.Equal(t, calls, a.calls, a.route)
	}
}

// TestProposedCallAgainstToolChoiceIsRefused: a call the model proposed
// of a tool the request offers but its tool_choice rules out (none: no
// call at all; a forced tool: that one only) was relayed, and the client
// ran a refund it had asked not to be proposed. RunAgent does not run
// such a call (runtime.OfferedTools); the gateway refuses it as a call of
// a tool the request does not offer, on every route, whole or streamed.
func TestProposedCallAgainstToolChoiceIsRefused(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		g := choiceGateway(t, 1, "refund", `{"amount":5}`)
		assertRefused(t, choiceAsk{choice: "none"}.ask(t, g), "refund, and the request's tool_choice none allows no tool call")
		assert.True(t, strings.Contains(g.metrics(t), `agentc_serve_blocks_total{layer="tools",stage="tool"} 6`), "each refusal is counted")
	})
	t.Run("another tool forced", func(t *testing.T) {
		g := choiceGateway(t, 1, "refund", `{"amount":5}`)
		assertRefused(t, choiceAsk{choice: "get_weather"}.ask(t, g), "refund, and the request's tool_choice forces get_weather")
	})
	t.Run("the tool forced", func(t *testing.T) {
		g := choiceGateway(t, 1, "refund", `{"amount":5}`)
		assertRelayed(t, choiceAsk{choice: "refund"}.ask(t, g), "refund")
	})
	t.Run("required", func(t *testing.T) {
		g := choiceGateway(t, 1, "refund", `{"amount":5}`)
		assertRelayed(t, choiceAsk{choice: "required"}.ask(t, g), "refund")
	})
}

// TestTextAnswerUnderRequiredToolChoiceIsRelayed: tool_choice required
// (Anthropic's any) asks the provider for a call; an answer of text alone
// is relayed as the provider gave it, as RunAgent ends its turn on it.
func TestTextAnswerUnderRequiredToolChoiceIsRelayed(t *testing.T) {
	oa, an := make([]reply, 4), make([]reply, 2)
	for i := range oa {
		oa[i] = reply{body: transcript(t, "openai", "text.sse")}
	}
	for i := range an {
		an[i] = reply{body: transcript(t, "anthropic", "text.sse")}
	}
	g := newGatewayWith(t, proposalDecls, typicalChain, oa, an)
	assertRelayed(t, choiceAsk{choice: "required"}.ask(t, g), nil...)
}

// TestSerialRequestRefusesSeveralCalls: under parallel_tool_calls false
// (Anthropic's disable_parallel_tool_use true) an answer of two identical
// refund calls was relayed whole, and the client, which counted on one
// call at a time, ran the refund twice. Such an answer is refused, on
// every route, whole or streamed; without the setting it is relayed.
func TestSerialRequestRefusesSeveralCalls(t *testing.T) {
	for _, choice := range []string{"", "required", "refund"} {
		t.Run("choice "+choice, func(t *testing.T) {
			g := choiceGateway(t, 2, "refund", `{"amount":5}`)
			assertRefused(t, choiceAsk{choice: choice, serial: true}.ask(t, g), "the model proposed 2 tool calls in one answer, and the request allows one")
		})
	}
	t.Run("one call", func(t *testing.T) {
		g := choiceGateway(t, 1, "refund", `{"amount":5}`)
		assertRelayed(t, choiceAsk{serial: true}.ask(t, g), "refund")
	})
	t.Run("parallel allowed", func(t *testing.T) {
		g := choiceGateway(t, 2, "get_weather", `{"location":"Paris"}`)
		assertRelayed(t, choiceAsk{}.ask(t, g), "get_weather", "get_weather")
	})
}
