package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proposalDecls declares the tools a model may propose and a tool chain
// that refuses some of their calls.
const proposalDecls = `
tools: {
	get_weather: args: {type: "object", required: ["location"], properties: {location: {type: "string"}, unit: {type: "string"}}}
	delete_account: {}
	fetch_page: {url_arg: "url", args: {type: "object", properties: url: type: "string"}}
	refund: args: {type: "object", required: ["amount"], properties: amount: type: "number"}
	send_note: args: {type: "object", properties: text: type: "string"}
	close_account: args: {type: "object", required: ["account_id"], properties: account_id: type: "integer"}
	read_report: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
}
chains: tool: [
	{use: "meter", budget: calls: 1},
	{use: "tool_policy", deny: ["delete_account"]},
	{use: "egress", allow: ["api.example.com"], tools: ["fetch_page"]},
	{use: "file_check", roots: ["."], tools: ["read_report"]},
	{use: "guard", name: "refund_limit", tools: ["refund"], deny: "args.amount > 100.0", message: "refunds over 100 need an approver"},
	{use: "pii", action: "redact", tools: ["send_note"]},
	{use: "guard", name: "protected_account", tools: ["close_account"], deny: "args.account_id == 9007199254740993", message: "account 9007199254740993 is protected"},
	{use: "audit"},
	{use: "retry", max_attempts: 2},
]`

// oaToolCallSSE is an OpenAI stream: some text, then a call of name with
// args, in two fragments.
func oaToolCallSSE(name, args string) string {
	return oaCallSSE("Let me check.", name, args, "tool_calls")
}

// oaCallSSE is an OpenAI stream: text (none when empty), then a call of
// name with args, in two fragments, ending with finish.
func oaCallSSE(text, name, args, finish string) string {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	half := len(args) / 2
	lead := chunk(`{"role":"assistant","content":`+q(text)+`}`, "null")
	if text == "" {
		lead = chunk(`{"role":"assistant"}`, "null")
	}
	return lead +
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+q(name)+`,"arguments":`+q(args[:half])+`}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+q(args[half:])+`}}]}`, "null") +
		chunk(`{}`, q(finish)) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
}

// anToolUseSSE is an Anthropic stream: some text, then a tool_use of name
// with args, in two fragments.
func anToolUseSSE(name, args string) string {
	return anCallSSE("Let me check.", name, args)
}

// anCallSSE is an Anthropic stream: text (none when empty), then a
// tool_use of name with args, in two fragments.
func anCallSSE(text, name, args string) string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	half := len(args) / 2
	lead := ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+q(text)+`}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	at := "1"
	if text == "" {
		lead, at = "", "0"
	}
	return ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`) +
		lead +
		ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"tool_use","id":"toolu_1","name":`+q(name)+`,"input":{}}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"input_json_delta","partial_json":`+q(args[:half])+`}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"input_json_delta","partial_json":`+q(args[half:])+`}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":`+at+`}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

func proposalTool(name string) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name})
}

func anProposalTool(name string) anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name,
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}
}

// anStreamProposal streams an Anthropic client's request offering tool to
// model and returns the message it accumulated and the stream's error.
func anStreamProposal(t *testing.T, g *gateway, model, tool string) (anthropic.Message, error) {
	t.Helper()
	as := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))},
		Tools:    []anthropic.ToolUnionParam{anProposalTool(tool)}})
	var msg anthropic.Message
	for as.Next() {
		require.NoError(t, msg.Accumulate(as.Current()))
	}
	return msg, as.Err()
}

// proposals are model tool calls the policy forbids, each with the layer
// that refuses it.
var proposals = []struct{ name, tool, args, layer string }{
	{"denied tool", "delete_account", `{"id":"42"}`, "tool_policy"},
	{"args schema", "get_weather", `{"unit":"c"}`, "tools"},
	{"args not an object", "get_weather", `["Paris"]`, "tools"},
	{"egress", "fetch_page", `{"url":"http://169.254.169.254/latest/meta-data/"}`, "egress"},
	{"guard", "refund", `{"amount":500}`, "refund_limit"},
	// pii redact cannot mask a call the client runs: the call is refused,
	// not relayed with the card number in clear nor with it masked.
	{"pii redact", "send_note", `{"text":"pay with 4111 1111 1111 1111"}`, "pii"},
	// The chain reads the last amount (encoding/json), a client's parser
	// may run the first: a key given twice, at any depth, is refused.
	{"key twice", "refund", `{"amount":500,"amount":5}`, "tools"},
	{"nested key twice", "send_note", `{"text":"hi","meta":[{"to":"x","to":"y"}]}`, "tools"},
	{"key twice in another case", "refund", `{"amount":5,"Amount":500}`, "tools"},
	// The chain read 9007199254740993 as the float64 9007199254740992 and
	// let the call through; the client runs it on the number written.
	{"integer above 2^53", "close_account", `{"account_id":9007199254740993}`, "protected_account"},
	// A number no float64 or int64 holds cannot be checked as written.
	{"more digits than float64 holds", "refund", `{"amount":0.1000000000000000055511151231257827}`, "tools"},
	{"exponent out of range", "refund", `{"amount":1e400}`, "tools"},
	// file_check reads a relative path against its root, the client that
	// runs the call against its own directory, or as a URL.
	{"relative path", "read_report", `{"path":"etc/shadow"}`, "file_check"},
	{"file URL", "read_report", `{"path":"file:///etc/shadow"}`, "file_check"},
}

// TestProposedToolCallsAreAdmittedBeforeTheyAreRelayed: a tool call the
// model proposes that the tool chain would refuse is never relayed to the
// client (which runs it): a whole response is a 403 naming the layer; a
// stream sends the text before the call, then an error event, and no
// fragment of the call.
func TestProposedToolCallsAreAdmittedBeforeTheyAreRelayed(t *testing.T) {
	for _, tc := range proposals {
		t.Run(tc.name, func(t *testing.T) {
			body := oaToolCallSSE(tc.tool, tc.args)
			g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: body}, {body: body}}, []reply{{body: anToolUseSSE(tc.tool, tc.args)}})
			ctx := context.Background()
			params := openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
				Tools:    []openai.ChatCompletionToolUnionParam{proposalTool(tc.tool)}}

			_, err := g.openai(t).Chat.Completions.New(ctx, params)
			var oerr *openai.Error
			require.True(t, errors.As(err, &oerr), "%v", err)
			assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
			assert.Contains(t, oerr.RawJSON(), `"layer":"`+tc.layer+`"`)
			assert.Contains(t, oerr.RawJSON(), `"code":"blocked"`)

			stream := g.openai(t).Chat.Completions.NewStreaming(ctx, params)
			var text strings.Builder
			fragments := 0
			for stream.Next() {
				for _, c := range stream.Current().Choices {
					text.WriteString(c.Delta.Content)
					fragments += len(c.Delta.ToolCalls)
				}
			}
			assert.Equal(t, "Let me check.", text.String(), "the text before the call streams")
			assert.Zero(t, fragments, "no fragment of a refused call is sent")
			require.Error(t, stream.Err())
			assert.Contains(t, stream.Err().Error(), tc.layer)

			msg, err := anStreamProposal(t, g, "backup", tc.tool)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "permission_error")
			for _, b := range msg.Content {
				assert.NotEqual(t, "tool_use", b.Type, "no tool_use block of a refused call is sent")
			}
			m := g.metrics(t)
			assert.Contains(t, m, `agentc_serve_blocks_total{layer="`+tc.layer+`",stage="tool"} 3`)
			// No execution layer acted on a proposal: the tool meter
			// charged nothing and the audit wrote nothing.
			assert.NotContains(t, m, "agentc_serve_tool_calls_total")
		})
	}
}

// TestAdmittedToolCallIsRelayed: a call the policy lets run reaches the
// client whole, streamed and not.
func TestAdmittedToolCallIsRelayed(t *testing.T) {
	args := `{"location":"Paris","unit":"c"}`
	body := oaToolCallSSE("get_weather", args)
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: body}, {body: body}}, nil)
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool}}
	c, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, c.Choices[0].Message.ToolCalls, 1)
	assert.JSONEq(t, args, c.Choices[0].Message.ToolCalls[0].Function.Arguments)

	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "Let me check.", acc.Choices[0].Message.Content)
	assert.JSONEq(t, args, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
}

// TestOfferedUndeclaredToolIsRefused: a request that offers a tool the
// policy does not declare is refused before any model is called; with
// settings.allow_undeclared_tools it is served.
func TestOfferedUndeclaredToolIsRefused(t *testing.T) {
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: oaToolCallSSE("rm_rf", `{}`)}}, nil)
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("rm_rf")}}
	_, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	var oerr *openai.Error
	require.True(t, errors.As(err, &oerr), "%v", err)
	assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
	assert.Contains(t, oerr.RawJSON(), `"layer":"tools"`)
	assert.Contains(t, oerr.RawJSON(), `rm_rf`)
	assert.Zero(t, g.oa.requests(), "no model is called")

	g = newGatewayWith(t, proposalDecls+"\nsettings: allow_undeclared_tools: true", typicalChain, []reply{{body: oaToolCallSSE("rm_rf", `{}`)}}, nil)
	c, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, c.Choices[0].Message.ToolCalls, 1)
	assert.Equal(t, "rm_rf", c.Choices[0].Message.ToolCalls[0].Function.Name)
}

// TestHedgeLoserSpendIsAttributedToItsModel: a hedge's cancelled racer
// billed its input at its own model's prices; the spend metric counts it
// under that model, beside the winner's.
func TestHedgeLoserSpendIsAttributedToItsModel(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	g := newGateway(t, `{use: "hedge", models: ["primary", "backup"], delay: "1ms"},`,
		[]reply{{body: transcript(t, "openai", "text.sse"), gate: gate, holdAfter: 0}},
		[]reply{{body: transcript(t, "anthropic", "text.sse")}})
	c, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there, how are you today?")}})
	require.NoError(t, err)
	assert.Equal(t, "backup", c.Model)
	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_budget_spend_usd_total{model="backup",tenant="acme"}`)
	assert.Contains(t, m, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`, "the cancelled racer's input is billed")
	assert.NotContains(t, m, `agentc_serve_tokens_total{direction="input",model="primary"`, "tokens count what was served")
}

// TestRelayedToolCallIsTheOneAdmitted: the gateway admitted a call by its
// fragments as the runtime assembles them and relayed the fragments as
// they came, which the client assembles by its own rules: an Anthropic
// client took the first fragment's name and id. Each call is now relayed
// whole, as admitted; the runtime joins a name sent in fragments as
// OpenAI's SDKs do ("get_" then "weather"). A name repeated in every
// fragment, which an OpenAI client read doubled, is relayed once.
func TestRelayedToolCallIsTheOneAdmitted(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	tail := chunk(`{}`, `"tool_calls"`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
	split := chunk(`{"role":"assistant","content":"On it."}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"get_","arguments":"{\"location\":"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"weather","arguments":"\"Paris\"}"}}]}`, "null") + tail
	repeated := chunk(`{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"location\":"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"name":"get_weather","arguments":"\"Lyon\"}"}}]}`, "null") + tail
	for _, tc := range []struct{ name, body, id, tool, args string }{
		{"name split", split, "call_1", "get_weather", `{"location":"Paris"}`},
		{"name repeated", repeated, "call_2", "get_weather", `{"location":"Lyon"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGatewayWith(t, proposalDecls+"\nsettings: allow_undeclared_tools: true", typicalChain,
				[]reply{{body: tc.body}, {body: tc.body}}, nil)
			ctx := context.Background()
			stream := g.openai(t).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
				Tools:    []openai.ChatCompletionToolUnionParam{proposalTool(tc.tool)}})
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			require.NoError(t, stream.Err())
			require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
			call := acc.Choices[0].Message.ToolCalls[0]
			assert.Equal(t, tc.tool, call.Function.Name, "the OpenAI client runs the call admitted")
			assert.Equal(t, tc.id, call.ID)
			assert.JSONEq(t, tc.args, call.Function.Arguments)

			msg, err := anStreamProposal(t, g, "primary", tc.tool)
			require.NoError(t, err)
			var uses []anthropic.ContentBlockUnion
			for _, b := range msg.Content {
				if b.Type == "tool_use" {
					uses = append(uses, b)
				}
			}
			require.Len(t, uses, 1)
			assert.Equal(t, tc.tool, uses[0].Name, "the Anthropic client runs the call admitted")
			assert.Equal(t, tc.id, uses[0].ID)
			assert.JSONEq(t, tc.args, string(uses[0].Input))
		})
	}

	// "delete_" then "account" is delete_account, which tool_policy
	// denies, as the client would have run it; it was admitted as
	// "account", an undeclared tool let through.
	denied := chunk(`{"tool_calls":[{"index":0,"id":"call_3","type":"function","function":{"name":"delete_","arguments":"{\"id\":"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"name":"account","arguments":"\"42\"}"}}]}`, "null") + tail
	g := newGatewayWith(t, proposalDecls+"\nsettings: allow_undeclared_tools: true", typicalChain, []reply{{body: denied}}, nil)
	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}})
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			assert.Empty(t, ch.Delta.ToolCalls, "no call is relayed")
		}
	}
	var oerr *openai.Error
	require.True(t, errors.As(stream.Err(), &oerr), "%v", stream.Err())
	assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
	assert.Contains(t, oerr.RawJSON(), "tool delete_account is denied")
}

// TestRelayedToolCallsAreIndexedByPlace: calls an upstream streamed at
// indexes 1 and 4 were admitted as two calls and relayed at those
// indexes, of which an OpenAI client made five, three of them empty (no
// id, no name) that no layer had seen. They are relayed as calls 0 and 1.
func TestRelayedToolCallsAreIndexedByPlace(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	call := func(index, id, city string) string {
		return chunk(`{"tool_calls":[{"index":`+index+`,"id":"`+id+`","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"`+city+`\"}"}}]}`, "null")
	}
	body := call("1", "call_a", "Lyon") + call("4", "call_b", "Nice") + chunk(`{}`, `"tool_calls"`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: body}}, nil)
	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	calls := acc.Choices[0].Message.ToolCalls
	require.Len(t, calls, 2, "%+v", calls)
	for i, want := range []struct{ id, args string }{{"call_a", `{"location":"Lyon"}`}, {"call_b", `{"location":"Nice"}`}} {
		assert.Equal(t, want.id, calls[i].ID)
		assert.Equal(t, "get_weather", calls[i].Function.Name)
		assert.JSONEq(t, want.args, calls[i].Function.Arguments)
	}
}

// TestProposedToolCallsOnTheResponsesRoute: the Responses route admits a
// proposed call as the other routes do: a whole response is a 403 naming
// the layer, a stream sends the text before the call, then an error
// event and response.failed, and no item of the call.
func TestProposedToolCallsOnTheResponsesRoute(t *testing.T) {
	for _, tc := range proposals {
		t.Run(tc.name, func(t *testing.T) {
			body := oaToolCallSSE(tc.tool, tc.args)
			g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: body}, {body: body}}, nil)
			params := responses.ResponseNewParams{Model: "primary", Input: rsText("go"),
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: tc.tool,
					Parameters: map[string]any{"type": "object"}, Strict: openai.Bool(false)}}}}

			_, err := g.openai(t).Responses.New(context.Background(), params)
			var oerr *openai.Error
			require.True(t, errors.As(err, &oerr), "%v", err)
			assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
			assert.Contains(t, oerr.RawJSON(), `"layer":"`+tc.layer+`"`)

			acc, types, err := rsStream(t, g.openai(t).Responses.NewStreaming(context.Background(), params))
			require.Error(t, err)
			assert.Contains(t, types, "response.failed")
			for _, ty := range types {
				assert.NotContains(t, ty, "function_call", "no event of a refused call is sent")
			}
			assert.Equal(t, "Let me check.", acc.Snapshot().OutputText(), "the text before the call streams")
			assert.Contains(t, g.metrics(t), `agentc_serve_blocks_total{layer="`+tc.layer+`",stage="tool"} 2`)
		})
	}
}

// TestProposedCallOfAToolNotOfferedIsRefused: a call the model proposes
// of a tool the request does not offer (one the policy declares and lets
// run, for another client) was admitted and relayed, for a client that
// dispatches calls by name to run a tool it never offered. It is refused
// by layer tools, streamed or not, on every route.
func TestProposedCallOfAToolNotOfferedIsRefused(t *testing.T) {
	body := oaToolCallSSE("refund", `{"amount":5}`)
	oa := make([]reply, 6)
	for i := range oa {
		oa[i] = reply{body: body}
	}
	g := newGatewayWith(t, proposalDecls, typicalChain, oa, []reply{{body: anToolUseSSE("refund", `{"amount":5}`)}})
	ctx := context.Background()
	for _, tools := range [][]openai.ChatCompletionToolUnionParam{{proposalTool("get_weather")}, nil} {
		params := openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}, Tools: tools}
		_, err := g.openai(t).Chat.Completions.New(ctx, params)
		var oerr *openai.Error
		require.True(t, errors.As(err, &oerr), "%v", err)
		assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
		assert.Contains(t, oerr.RawJSON(), `"layer":"tools"`)
		assert.Contains(t, oerr.Message, "refund, which the request does not offer")

		stream := g.openai(t).Chat.Completions.NewStreaming(ctx, params)
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				assert.Empty(t, c.Delta.ToolCalls, "no fragment of the call is sent")
			}
		}
		require.Error(t, stream.Err())
		assert.Contains(t, stream.Err().Error(), "does not offer")
	}

	msg, err := anStreamProposal(t, g, "backup", "send_note")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not offer")
	for _, b := range msg.Content {
		assert.NotEqual(t, "tool_use", b.Type)
	}

	code, _, resp := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": "go", "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}`))
	assert.Equal(t, http.StatusForbidden, code, resp)
	assert.Contains(t, resp, "does not offer")
	assert.Contains(t, g.metrics(t), `agentc_serve_blocks_total{layer="tools",stage="tool"} 6`)
}
