package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// rsWeatherTool is get_weather as a Responses function tool.
var rsWeatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "get_weather", Description: openai.String("The weather of a place."), Strict: openai.Bool(false),
	Parameters: map[string]any{"type": "object", "required": []string{"location"},
		"properties": map[string]any{"location": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}}},
}}

func rsInput(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: items}
}

func rsText(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// rsStream reads a Responses stream to its end through the SDK's
// accumulator, asserting the events' sequence numbers run from 0 one by
// one; it returns the accumulator, the events' types and the error: the
// stream's, or the message of an error event.
func rsStream(t *testing.T, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (*responses.ResponseAccumulator, []string, error) {
	t.Helper()
	var acc responses.ResponseAccumulator
	var types []string
	var failed error
	for n := int64(0); stream.Next(); n++ {
		ev := stream.Current()
		types = append(types, ev.Type)
		assert.Equal(t, n, ev.SequenceNumber, "event %d (%s)", n, ev.Type)
		var ws responses.ResponsesServerEventUnion
		require.NoError(t, json.Unmarshal([]byte(ev.RawJSON()), &ws), ev.RawJSON())
		if err := acc.AddEvent(ws); err != nil && ev.Type != "error" {
			t.Fatalf("the accumulator refused %s: %v", ev.RawJSON(), err)
		}
		if ev.Type == "error" && failed == nil {
			failed = errors.New(ev.Message)
		}
	}
	if err := stream.Err(); err != nil {
		return &acc, types, err
	}
	return &acc, types, failed
}

func TestResponsesText(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	resp, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "primary", Input: rsText("Hello"), Instructions: openai.String("Be brief."),
		MaxOutputTokens: openai.Int(64), Temperature: openai.Float(0.2),
		Metadata: map[string]string{"ticket": "T-1"}, User: openai.String("u-42"),
	})
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", resp.OutputText())
	assert.Equal(t, responses.ResponseStatusCompleted, resp.Status)
	assert.Equal(t, "primary", resp.Model)
	assert.True(t, strings.HasPrefix(resp.ID, "resp_"), resp.ID)
	require.Len(t, resp.Output, 1)
	assert.Equal(t, "message", resp.Output[0].Type)
	assert.Equal(t, int64(19), resp.Usage.InputTokens)
	assert.Equal(t, int64(10), resp.Usage.OutputTokens)
	assert.Equal(t, int64(29), resp.Usage.TotalTokens)
	assert.Equal(t, "Be brief.", resp.Instructions.OfString)
	assert.Equal(t, int64(64), resp.MaxOutputTokens)
	assert.Equal(t, "T-1", resp.Metadata["ticket"])
	assert.Contains(t, resp.RawJSON(), `"store":false`, "the response says it was not stored")

	up := g.oa.body(0)
	assert.Contains(t, up, `{"role":"system","content":"Be brief."}`)
	assert.Contains(t, up, `{"role":"user","content":"Hello"}`)
	assert.Contains(t, up, `"max_tokens":64`)
	assert.Contains(t, up, `"user":"u-42"`)
	assert.NotContains(t, up, "T-1", "metadata stays at the gateway")
	assert.Contains(t, g.metrics(t), `agentc_serve_requests_total{code="200",model="primary",route="responses"} 1`)
	g.noLeak(t, resp.RawJSON())
}

func TestResponsesStreamText(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "primary", Input: rsText("Hello")})
	acc, types, err := rsStream(t, stream)
	require.NoError(t, err)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}, types[:4])
	assert.Equal(t, []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}, types[len(types)-4:])
	deltas := 0
	for _, ty := range types {
		if ty == "response.output_text.delta" {
			deltas++
		}
	}
	assert.Equal(t, 9, deltas, "each upstream delta with text is one event")
	snap := acc.Snapshot()
	assert.Equal(t, "response.completed", snap.TerminalEvent)
	assert.Equal(t, "Hello! How can I help you today?", snap.OutputText())
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", final.OutputText())
	assert.Equal(t, int64(29), final.Usage.TotalTokens)
	assert.Equal(t, responses.ResponseStatusCompleted, final.Status)
}

// TestResponsesFunctionCallRoundTrip: a function call proposed, its
// output sent back with the call as the next request's input.
func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "tool_call.sse")}, {body: transcript(t, "openai", "text.sse")}}, nil)
	client := g.openai(t)
	question := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	first, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "primary",
		Input: rsInput(question), Tools: []responses.ToolUnionParam{rsWeatherTool}, Store: openai.Bool(false)})
	require.NoError(t, err)
	require.Len(t, first.Output, 1, first.RawJSON())
	call := first.Output[0].AsFunctionCall()
	assert.Equal(t, "function_call", string(call.Type))
	assert.Equal(t, "call_DdmO9pD3xa9XTPNJ32zg2hcA", call.CallID)
	assert.Equal(t, "get_weather", call.Name)
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(call.Arguments), &args), call.Arguments)
	assert.Equal(t, "Paris, France", args["location"])
	assert.Contains(t, g.oa.body(0), `"tools":[{"type":"function","function":{"name":"get_weather"`)

	// The call goes back as the response gave it (its id and status too).
	callParam := call.ToParam()
	output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temperature": 18}`)
	output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	second, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "primary",
		Input: rsInput(question, responses.ResponseInputItemUnionParam{OfFunctionCall: &callParam}, output),
		Tools: []responses.ToolUnionParam{rsWeatherTool}})
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", second.OutputText())
	var up struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(g.oa.body(1)), &up))
	require.Len(t, up.Messages, 3, g.oa.body(1))
	assert.Equal(t, "assistant", up.Messages[1].Role)
	require.Len(t, up.Messages[1].ToolCalls, 1)
	assert.Equal(t, call.CallID, up.Messages[1].ToolCalls[0].ID)
	assert.Equal(t, "get_weather", up.Messages[1].ToolCalls[0].Function.Name)
	assert.Equal(t, "tool", up.Messages[2].Role)
	assert.Equal(t, call.CallID, up.Messages[2].ToolCallID)
	assert.Equal(t, `{"temperature": 18}`, up.Messages[2].Content)
}

func TestResponsesStreamFunctionCall(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "tool_call.sse")}}, nil)
	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "primary",
		Input: rsText("What is the weather in Paris?"), Tools: []responses.ToolUnionParam{rsWeatherTool}})
	acc, types, err := rsStream(t, stream)
	require.NoError(t, err)
	assert.Contains(t, types, "response.function_call_arguments.delta")
	assert.Contains(t, types, "response.function_call_arguments.done")
	snap := acc.Snapshot()
	assert.Equal(t, "response.completed", snap.TerminalEvent)
	require.Len(t, snap.Output, 1)
	out := snap.Output[0]
	assert.Equal(t, "function_call", out.Type)
	assert.Equal(t, "call_DdmO9pD3xa9XTPNJ32zg2hcA", out.CallID)
	assert.Equal(t, "get_weather", out.Name)
	assert.JSONEq(t, `{"location":"Paris, France","unit":"c"}`, out.Arguments)
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	require.Len(t, final.Output, 1)
	assert.JSONEq(t, `{"location":"Paris, France","unit":"c"}`, final.Output[0].Arguments.OfString)
}

// TestResponsesProposedCallRefused: the tool chain refuses a proposed call
// before any of it reaches the client, streamed or not.
func TestResponsesProposedCallRefused(t *testing.T) {
	args := `{"amount": 500}`
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: oaToolCallSSE("refund", args)}, {body: oaToolCallSSE("refund", args)}}, nil)
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "refund", Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object"}}}}
	_, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{Model: "primary", Input: rsText("refund me"), Tools: tools})
	var oe *openai.Error
	require.True(t, errors.As(err, &oe), "got %v", err)
	assert.Equal(t, http.StatusForbidden, oe.StatusCode)
	assert.Contains(t, oe.RawJSON(), `"layer":"refund_limit"`)

	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "primary", Input: rsText("refund me"), Tools: tools})
	acc, types, err := rsStream(t, stream)
	// The text before the call went out; the call did not.
	assert.Contains(t, types, "response.output_text.delta")
	assert.NotContains(t, types, "response.function_call_arguments.delta")
	assert.Equal(t, []string{"error", "response.failed"}, types[len(types)-2:])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refunds over 100 need an approver")
	assert.Equal(t, "response.failed", acc.Snapshot().TerminalEvent)
	failed, err := acc.ReconstructedResponse()
	require.Error(t, err, "the error event is a protocol error to the accumulator")
	assert.Nil(t, failed)
}

func TestResponsesRefusals(t *testing.T) {
	g := newGateway(t, typicalChain+`{use: "meter", name: "spend", budget: calls: 1},`,
		[]reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	client := g.openai(t)
	ctx := context.Background()
	status := func(err error) (int, string) {
		t.Helper()
		var oe *openai.Error
		require.True(t, errors.As(err, &oe), "got %v", err)
		return oe.StatusCode, oe.RawJSON()
	}

	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "primary", Input: rsText("my password is hunter2")})
	code, body := status(err)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, `"code":"blocked"`)
	assert.Contains(t, body, `"layer":"no_passwords"`)

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "primary", Input: rsText("my password is hunter2")})
	for stream.Next() {
		t.Fatal("a blocked call streams nothing")
	}
	code, _ = status(stream.Err())
	assert.Equal(t, http.StatusForbidden, code, "a block before any output is a status")

	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-9", Input: rsText("hi")})
	code, body = status(err)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `"code":"unknown_model"`)

	run := option.WithHeader(RunHeader, "run-1")
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "primary", Input: rsText("hi")}, run)
	require.NoError(t, err)
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "primary", Input: rsText("hi")}, run)
	code, body = status(err)
	assert.Equal(t, http.StatusPaymentRequired, code)
	assert.Contains(t, body, `"code":"budget"`)
	assert.Contains(t, body, "calls ceiling 1 reached")
	assert.Equal(t, 1, g.oa.requests(), "only the call served reached the model")
}

func TestResponsesBadRequests(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	tests := []struct{ name, body, want string }{
		{"malformed", `{"model": "primary", "input": "hi"`, "malformed JSON at line 1"},
		{"no input", `{"model": "primary"}`, "input: required"},
		{"empty input", `{"model": "primary", "input": []}`, "input: an empty list"},
		{"previous response", `{"model": "primary", "input": "hi", "previous_response_id": "resp_1"}`, "previous_response_id: the gateway keeps no responses"},
		{"store", `{"model": "primary", "input": "hi", "store": true}`, "store: true is not served"},
		{"built-in tool", `{"model": "primary", "input": "hi", "tools": [{"type": "web_search"}]}`, `tools[0].type: "web_search" is a built-in tool, which runs outside the policy's tool chain`},
		{"built-in tool choice", `{"model": "primary", "input": "hi", "tool_choice": {"type": "file_search"}}`, `tool_choice.type: "file_search" is a built-in tool`},
		{"item reference", `{"model": "primary", "input": [{"type": "item_reference", "id": "msg_1"}]}`, "input[0]: an item_reference is not served"},
		{"built-in call item", `{"model": "primary", "input": [{"type": "computer_call_output", "call_id": "c"}]}`, `input[0].type: want "message"`},
		{"role", `{"model": "primary", "input": [{"role": "tool", "content": "x"}]}`, `input[0].role: want "user"`},
		{"call without id", `{"model": "primary", "input": [{"type": "function_call", "name": "get_weather", "arguments": "{}"}]}`, "input[0].call_id: required"},
		{"call arguments", `{"model": "primary", "input": [{"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{"}]}`, "input[0].arguments: not valid JSON"},
		{"image from the assistant", `{"model": "primary", "input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]}`, "input[0].content[0]: an input_image part belongs in a user message"},
		{"file", `{"model": "primary", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]}`, `input[0].content[0].type: want "input_text"`},
		{"reasoning without content", `{"model": "primary", "input": [{"type": "reasoning", "id": "rs_1", "summary": []}]}`, "input[0].encrypted_content: required"},
		{"field not carried", `{"model": "primary", "input": "hi", "background": true}`, "background: not carried by the gateway"},
		{"nested field not carried", `{"model": "primary", "input": "hi", "text": {"format": {"type": "text", "description": "d"}}}`, "text.format.description: not carried"},
		{"custom tool's syntax", `{"model": "primary", "input": "hi", "tools": [{"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "ebnf", "definition": "start: x"}}]}`, `tools[0].format.syntax: want "lark" or "regex", got "ebnf"`},
		{"custom tool without a grammar", `{"model": "primary", "input": "hi", "tools": [{"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark"}}]}`, `tools[0].format.definition: required`},
		{"custom tool's format", `{"model": "primary", "input": "hi", "tools": [{"type": "custom", "name": "apply_patch", "format": {"type": "json"}}]}`, `tools[0].format.type: want "text" or "grammar", got "json"`},
		{"custom tool's unknown field", `{"model": "primary", "input": "hi", "tools": [{"type": "custom", "name": "apply_patch", "defer_loading": true}]}`, `tools[0].defer_loading`},
		{"custom choice of a function", `{"model": "primary", "input": "hi", "tools": [{"type": "function", "name": "get_weather"}], "tool_choice": {"type": "custom", "name": "get_weather"}}`, `tool_choice.type: "custom" forces a custom tool`},
		{"custom call without call_id", `{"model": "primary", "input": [{"type": "custom_tool_call", "name": "apply_patch", "input": "x"}]}`, `input[0].call_id: required`},
		{"local shell", `{"model": "primary", "input": "hi", "tools": [{"type": "local_shell"}]}`, `tools[0].type: "local_shell" is not served: its calls are the provider's local_shell_call items`},
		{"client metadata", `{"model": "primary", "input": "hi", "client_metadata": {"n": 1}}`, "client_metadata"},
		{"include", `{"model": "primary", "input": "hi", "include": ["message.output_text.logprobs"]}`, `include[0]: "message.output_text.logprobs" is not served`},
		{"truncation", `{"model": "primary", "input": "hi", "truncation": "auto"}`, `truncation: "auto" is not served`},
		{"summary", `{"model": "primary", "input": "hi", "reasoning": {"summary": "brief"}}`, `reasoning.summary: want "auto", "concise" or "detailed", got "brief"`},
		{"max output", `{"model": "primary", "input": "hi", "max_output_tokens": 0}`, "max_output_tokens: must be at least 1"},
		{"schema", `{"model": "primary", "input": "hi", "text": {"format": {"type": "json_schema"}}}`, "text.format: type json_schema needs a name and a schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(tt.body))
			require.Equal(t, http.StatusBadRequest, code, body)
			typ, ecode, _, msg := openAIError(t, body)
			assert.Equal(t, "invalid_request_error", typ)
			assert.Equal(t, "bad_request", ecode)
			assert.Contains(t, msg, tt.want)
		})
	}
	assert.Zero(t, g.oa.requests(), "no model was called")

	// Through the SDK: previous_response_id is a 400 the client reads.
	_, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{Model: "primary", Input: rsText("hi"),
		PreviousResponseID: openai.String("resp_123")})
	var oe *openai.Error
	require.True(t, errors.As(err, &oe), "got %v", err)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Contains(t, oe.Message, "previous_response_id")
}

// TestResponsesOnAClaudeModel: the route translates at the edge; a Claude
// model answers through the Anthropic provider, streamed or not, a tool
// call included.
func TestResponsesOnAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}, {body: transcript(t, "anthropic", "tool_use.sse")}})
	client := g.openai(t)
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "backup", Input: rsText("Hello"),
		Instructions: openai.String("Be brief."), MaxOutputTokens: openai.Int(100)})
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", resp.OutputText())
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, int64(472), resp.Usage.InputTokens)
	up := g.an.body(0)
	assert.Contains(t, up, `"system":[{"type":"text","text":"Be brief."}]`)
	assert.Contains(t, up, `"max_tokens":100`)

	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "backup",
		Input: rsText("Weather in Paris and London?"), Tools: []responses.ToolUnionParam{rsWeatherTool}, MaxOutputTokens: openai.Int(100)})
	acc, _, err := rsStream(t, stream)
	require.NoError(t, err)
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(final.Output), 2, final.RawJSON())
	assert.Equal(t, "message", final.Output[0].Type)
	assert.Equal(t, "I'll check the weather in both cities.", final.OutputText())
	for _, it := range final.Output[1:] {
		assert.Equal(t, "function_call", it.Type)
		assert.Equal(t, "get_weather", it.Name)
		assert.True(t, strings.HasPrefix(it.CallID, "toolu_"), it.CallID)
	}
	assert.Zero(t, g.oa.requests())
}

// TestResponsesMidStreamFailure: an upstream failing after output ends
// the stream with an error event and response.failed.
func TestResponsesMidStreamFailure(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "error_mid_stream.sse")}}, nil)
	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "primary", Input: rsText("Hello")})
	acc, types, err := rsStream(t, stream)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mid-stream")
	assert.Equal(t, []string{"error", "response.failed"}, types[len(types)-2:])
	snap := acc.Snapshot()
	assert.Equal(t, "response.failed", snap.TerminalEvent)
	assert.Equal(t, "The answer is", snap.OutputText(), "the deltas before the failure arrive")
	assert.Equal(t, 1, g.oa.requests(), "a failure after output is never retried")
}

// TestResponsesAssistantTurn: the items of one assistant turn (a
// reasoning item the gateway returned, a message, function calls) are one
// assistant message, each part in its place.
func TestResponsesAssistantTurn(t *testing.T) {
	var p chatParams
	require.NoError(t, decodeResponses([]byte(`{"model": "backup", "input": [
		{"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
		{"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}], "encrypted_content": "sig"},
		{"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": ""},
		{"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "redacted_thinking:data"},
		{"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "done", "annotations": []}]},
		{"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "18C"}]}
	]}`), &p))
	msgs := p.req.Messages
	require.Len(t, msgs, 3)
	assert.Equal(t, runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "a"}, {Type: runtime.PartText, Text: "b"}}}, msgs[0])
	a := msgs[1]
	assert.Equal(t, "assistant", a.Role)
	require.Len(t, a.Parts, 3)
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartThinking, Text: "think", Signature: "sig"}, a.Parts[0])
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: "data"}, a.Parts[1])
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartText, Text: "done"}, a.Parts[2])
	require.Len(t, a.ToolCalls, 1)
	assert.Equal(t, "c1", a.ToolCalls[0].ID)
	assert.JSONEq(t, "{}", string(a.ToolCalls[0].Arguments))
	assert.Equal(t, 2, a.ToolCalls[0].PartsAfter, "the call came after the first reasoning item")
	assert.Equal(t, runtime.Message{Role: "tool", ToolCallID: "c1", Content: "18C"}, msgs[2])
}
