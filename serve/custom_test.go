package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// customDecls declares apply_patch, a custom (free-form) tool whose text
// the tool chain reads as args.input, and a guard on it.
const customDecls = `
tools: apply_patch: args: {type: "object", required: ["input"], properties: input: type: "string"}
chains: tool: [
	{use: "guard", name: "no_env", tools: ["apply_patch"], deny: "args.input.contains('.env')", message: "patches of .env files need review"},
]`

// patchGrammar is a lark grammar, as Codex sends apply_patch's.
const patchGrammar = `start: "*** Begin Patch" LF hunk+ "*** End Patch"`

// oaCustomCallSSE is an OpenAI stream: a call of the custom tool name with
// input, in two fragments, as the API streams one (custom.name and
// custom.input).
func oaCustomCallSSE(name, input string) string {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	half := len(input) / 2
	return chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_P1","type":"custom","custom":{"name":`+q(name)+`,"input":`+q(input[:half])+`}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"custom":{"input":`+q(input[half:])+`}}]}`, "null") +
		chunk(`{}`, `"tool_calls"`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n" +
		"data: [DONE]\n\n"
}

const (
	patchOK  = "*** Begin Patch\n*** Update File: README.md\n-teh\n+the\n*** End Patch"
	patchEnv = "*** Begin Patch\n*** Update File: .env\n+TOKEN=x\n*** End Patch"
)

// rsCustomBody is a Responses request offering apply_patch as a custom
// tool, after an earlier call of it and its output.
func rsCustomBody(stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model": "primary", "stream": stream,
		"tools": []any{map[string]any{"type": "custom", "name": "apply_patch", "description": "Edit files.",
			"format": map[string]any{"type": "grammar", "syntax": "lark", "definition": patchGrammar}}},
		"input": []any{
			map[string]any{"role": "user", "content": "Fix the typos."},
			map[string]any{"type": "custom_tool_call", "id": "ctc_0", "call_id": "call_P0", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
			map[string]any{"type": "custom_tool_call_output", "call_id": "call_P0", "output": "Done."},
		},
	})
	return b
}

// TestCustomToolResponses: a custom tool's call round trip on the
// Responses route: the tool reaches an OpenAI model as a custom tool, its
// grammar as sent, an earlier call and its output as a custom call and a
// tool message; the model's call comes back as a custom_tool_call item,
// streamed (custom_tool_call_input events) and not.
func TestCustomToolResponses(t *testing.T) {
	g := newGatewayWith(t, customDecls, typicalChain, []reply{
		{body: oaCustomCallSSE("apply_patch", patchOK)}, {body: oaCustomCallSSE("apply_patch", patchOK)}}, nil)

	resp, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{},
		option.WithRequestBody("application/json", rsCustomBody(false)))
	require.NoError(t, err)
	require.Len(t, resp.Output, 1, resp.RawJSON())
	call := resp.Output[0].AsCustomToolCall()
	assert.Equal(t, "custom_tool_call", resp.Output[0].Type)
	assert.Equal(t, "call_P1", call.CallID)
	assert.Equal(t, "apply_patch", call.Name)
	assert.Equal(t, patchOK, call.Input)
	require.Len(t, resp.Tools, 1)
	assert.Equal(t, "custom", resp.Tools[0].Type)
	assert.Equal(t, patchGrammar, resp.Tools[0].AsCustom().Format.Definition)

	var up struct {
		Tools []struct {
			Type   string `json:"type"`
			Custom struct {
				Name   string `json:"name"`
				Format struct {
					Type    string `json:"type"`
					Grammar struct{ Definition, Syntax string }
				} `json:"format"`
			} `json:"custom"`
		} `json:"tools"`
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID, Type string
				Custom   struct{ Name, Input string }
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(g.oa.body(0)), &up), g.oa.body(0))
	require.Len(t, up.Tools, 1)
	assert.Equal(t, "custom", up.Tools[0].Type)
	assert.Equal(t, "apply_patch", up.Tools[0].Custom.Name)
	assert.Equal(t, "grammar", up.Tools[0].Custom.Format.Type)
	assert.Equal(t, "lark", up.Tools[0].Custom.Format.Grammar.Syntax)
	assert.Equal(t, patchGrammar, up.Tools[0].Custom.Format.Grammar.Definition)
	require.Len(t, up.Messages, 3, g.oa.body(0))
	require.Len(t, up.Messages[1].ToolCalls, 1)
	assert.Equal(t, "custom", up.Messages[1].ToolCalls[0].Type)
	assert.Equal(t, "call_P0", up.Messages[1].ToolCalls[0].ID)
	assert.Equal(t, "*** Begin Patch\n*** End Patch", up.Messages[1].ToolCalls[0].Custom.Input)
	assert.Equal(t, "tool", up.Messages[2].Role)
	assert.Equal(t, "call_P0", up.Messages[2].ToolCallID)

	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{},
		option.WithRequestBody("application/json", rsCustomBody(true)))
	acc, types, err := rsStream(t, stream)
	require.NoError(t, err)
	assert.Contains(t, types, "response.custom_tool_call_input.delta")
	assert.Contains(t, types, "response.custom_tool_call_input.done")
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	require.Len(t, final.Output, 1)
	assert.Equal(t, patchOK, final.Output[0].AsCustomToolCall().Input)
	assert.Equal(t, "call_P1", final.Output[0].AsCustomToolCall().CallID)
}

// TestCustomToolRefusedByGuard: the tool chain reads a custom call's text
// as args.input; a guard refusing it refuses the call before any of it
// reaches the client, on both routes, streamed and not.
func TestCustomToolRefusedByGuard(t *testing.T) {
	sse := oaCustomCallSSE("apply_patch", patchEnv)
	g := newGatewayWith(t, customDecls, typicalChain, []reply{{body: sse}, {body: sse}, {body: sse}}, nil)

	code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, rsCustomBody(false))
	require.Equal(t, http.StatusForbidden, code, body)
	_, _, layer, msg := openAIError(t, body)
	assert.Equal(t, "no_env", layer, "the guard that read args.input")
	assert.Contains(t, msg, "patches of .env files need review")

	code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, rsCustomBody(true))
	require.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "patches of .env files need review")
	assert.NotContains(t, body, "TOKEN", "no fragment of the refused call")

	chat := `{"model": "primary", "stream": true, "messages": [{"role": "user", "content": "hi"}],
		"tools": [{"type": "custom", "custom": {"name": "apply_patch"}}]}`
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(chat))
	require.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "patches of .env files need review")
	assert.NotContains(t, body, "TOKEN")
}

// TestCustomToolChatCompletions: the Chat Completions route carries a
// custom tool (its grammar), an earlier custom call, and the model's
// custom call, as tool_calls of type custom: streamed and not.
func TestCustomToolChatCompletions(t *testing.T) {
	g := newGatewayWith(t, customDecls, typicalChain, []reply{
		{body: oaCustomCallSSE("apply_patch", patchOK)}, {body: oaCustomCallSSE("apply_patch", patchOK)}}, nil)
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Fix the typos."),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
				OfCustom: &openai.ChatCompletionMessageCustomToolCallParam{ID: "call_P0",
					Custom: openai.ChatCompletionMessageCustomToolCallCustomParam{Name: "apply_patch", Input: "*** Begin Patch\n*** End Patch"}}}}}},
			openai.ToolMessage("Done.", "call_P0"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionCustomTool(openai.ChatCompletionCustomToolCustomParam{
			Name: "apply_patch", Description: openai.String("Edit files."),
			Format: openai.ChatCompletionCustomToolCustomFormatUnionParam{OfGrammar: &openai.ChatCompletionCustomToolCustomFormatGrammarParam{
				Grammar: openai.ChatCompletionCustomToolCustomFormatGrammarGrammarParam{Definition: patchGrammar, Syntax: "lark"}}}})},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfCustomToolChoice: &openai.ChatCompletionNamedToolChoiceCustomParam{
			Custom: openai.ChatCompletionNamedToolChoiceCustomCustomParam{Name: "apply_patch"}}},
	}
	resp, err := g.openai(t).Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, resp.Choices[0].Message.ToolCalls, 1)
	tc := resp.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "custom", tc.Type)
	assert.Equal(t, "apply_patch", tc.AsCustom().Custom.Name)
	assert.Equal(t, patchOK, tc.AsCustom().Custom.Input)
	assert.Equal(t, "tool_calls", resp.Choices[0].FinishReason)

	up := g.oa.body(0)
	assert.Contains(t, up, `"tools":[{"type":"custom","custom":{"name":"apply_patch","description":"Edit files.","format":{"type":"grammar","grammar":{"definition":`)
	assert.Contains(t, up, `{"type":"custom","id":"call_P0","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}}`)
	assert.Contains(t, up, `"tool_choice":{"type":"custom","custom":{"name":"apply_patch"}}`)

	// Streamed: the SDK's chunk type has no custom member (the API's
	// reference streams function calls alone); the chunks hold it as the
	// API sends it.
	stream := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
	var input strings.Builder
	var typ, name string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			for _, f := range ch.Delta.ToolCalls {
				var raw struct {
					Type   string
					Custom struct{ Name, Input string }
				}
				require.NoError(t, json.Unmarshal([]byte(f.RawJSON()), &raw))
				typ, name = typ+raw.Type, name+raw.Custom.Name
				input.WriteString(raw.Custom.Input)
			}
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "custom", typ)
	assert.Equal(t, "apply_patch", name)
	assert.Equal(t, patchOK, input.String())

	for body, want := range map[string]string{
		`"tools": [{"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "grammar", "grammar": {"definition": "x", "syntax": "ebnf"}}}}]`:                                                      `tools[0].custom.format.grammar.syntax: want "lark" or "regex", got "ebnf"`,
		`"tools": [{"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text", "grammar": {"definition": "x"}}}}]`:                                                                           `tools[0].custom.format: a syntax and a definition belong to a format of type grammar`,
		`"tools": [{"type": "custom", "function": {"name": "apply_patch"}, "custom": {"name": "apply_patch"}}]`:                                                                                                  `tools[0].function: belongs to a tool of type function, not custom`,
		`"tools": [{"type": "custom", "custom": {"name": "apply_patch"}}], "tool_choice": {"type": "custom", "custom": {"name": "apply_patch"}, "function": {"name": "get_weather"}}`:                            `tool_choice.function: belongs to a tool choice of type function, not custom`,
		`"tools": [{"type": "custom", "custom": {"name": "apply_patch"}}], "tool_choice": {"type": "function", "function": {"name": "apply_patch"}, "custom": {"name": "apply_patch"}}`:                          `tool_choice.custom: belongs to a tool choice of type custom, not function`,
		`"tools": [{"type": "custom", "custom": {"name": "apply_patch", "defer_loading": true}}]`:                                                                                                                `tools[0].custom.defer_loading`,
		`"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "custom": {"input": "rm -rf /"}}]}]`: `messages[1]: tool_calls[0]: a call holds the member of its type alone`,
	} {
		req := `{"model": "primary", ` + body + `}`
		if !strings.Contains(body, `"messages"`) {
			req = `{"model": "primary", "messages": [{"role": "user", "content": "hi"}], ` + body + `}`
		}
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(req))
		requireInvalidRequest(t, code, resp, want)
	}
	assert.Equal(t, 2, g.oa.requests(), "no refused request reached the model")
}

// TestCustomToolOnAClaudeModel: a Claude model has no custom tools;
// offered one as a function of one string, its grammar would bind
// nothing. The call is a 400 naming the tool and the model.
func TestCustomToolOnAClaudeModel(t *testing.T) {
	g := newGatewayWith(t, customDecls, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	body := strings.Replace(string(rsCustomBody(false)), `"model":"primary"`, `"model":"backup"`, 1)
	code, _, resp := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(body))
	require.Equal(t, http.StatusBadRequest, code, resp)
	_, ecode, _, msg := openAIError(t, resp)
	assert.Equal(t, "permanent", ecode)
	assert.Contains(t, msg, "custom (free-form) tool apply_patch")
	assert.Contains(t, msg, "claude-sonnet-4-5")
	assert.Zero(t, g.an.requests())
}

// TestCodexDefaultTools: Codex's default toolset (apply_patch a custom
// tool with its lark grammar) is served when the policy declares its
// tools; web search, a built-in tool, stays refused (Codex sends none
// with web_search = "disabled").
func TestCodexDefaultTools(t *testing.T) {
	g := newGatewayWith(t, codexDecls, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	fixture := rsFixture(t, "codex_default_tools.json")
	code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, fixture)
	require.Equal(t, http.StatusBadRequest, code, body)
	_, _, _, msg := openAIError(t, body)
	assert.Contains(t, msg, `tools[3].type: "web_search" is a built-in tool`)

	var req map[string]any
	require.NoError(t, json.Unmarshal(fixture, &req))
	tools := req["tools"].([]any)
	require.Equal(t, "web_search", tools[3].(map[string]any)["type"])
	req["tools"] = tools[:3]
	b, err := json.Marshal(req)
	require.NoError(t, err)
	acc, _, err := rsSend(t, g, b)
	require.NoError(t, err)
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", final.OutputText())
	assert.Contains(t, g.oa.body(0), `{"type":"custom","custom":{"name":"apply_patch","description":"Use the `+"`apply_patch`"+` tool to edit files.`)
	assert.Contains(t, g.oa.body(0), `"format":{"type":"grammar","grammar":{"definition":"start: begin_patch hunk+ end_patch`)
}

// TestCallOfTheOtherKindRefused: a call whose kind is not that of the
// tool the request offers under its name (a function call of a custom
// tool, as an OpenAI-compatible upstream without custom tools makes one,
// or a custom call of a function tool) is refused before any of it
// reaches the client, which would run it as the other kind's.
func TestCallOfTheOtherKindRefused(t *testing.T) {
	fn := oaToolCallSSE("apply_patch", `{"input":"`+strings.ReplaceAll(patchOK, "\n", `\n`)+`"}`)
	custom := oaCustomCallSSE("get_weather", "Paris")
	g := newGatewayWith(t, customDecls+"\ntools: get_weather: args: {type: \"object\"}", typicalChain,
		[]reply{{body: fn}, {body: fn}, {body: custom}}, nil)

	code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, rsCustomBody(false))
	require.Equal(t, http.StatusForbidden, code, body)
	_, _, _, msg := openAIError(t, body)
	assert.Contains(t, msg, "the model proposed a function call of apply_patch, which the request offers as a custom tool")

	// Streamed, the text before the call went out: the stream fails.
	_, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, rsCustomBody(true))
	assert.Contains(t, body, "event: response.failed")
	assert.Contains(t, body, "a function call of apply_patch, which the request offers as a custom tool")
	assert.NotContains(t, body, "README", "no fragment of the refused call")

	chat := `{"model": "primary", "stream": true, "messages": [{"role": "user", "content": "hi"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}`
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(chat))
	require.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "a custom call of get_weather, which the request offers as a function tool")
	assert.NotContains(t, body, "Paris")
}

// TestCustomOfferOfAFunctionDeclaration: a custom offer of a tool the
// policy declares with other arguments than the custom shape ({"input":
// TEXT}) is refused before the model is called: its calls would reach the
// tool chain as {"input": TEXT}, where no check keyed on the declared
// arguments (arg_patterns on cmd, a path_arg, a url_arg) reads them.
func TestCustomOfferOfAFunctionDeclaration(t *testing.T) {
	decls := `
tools: {
	shell: args: {type: "object", properties: {cmd: {}}}
	untyped: {}
	readf: path_arg: "path"
	fetch: url_arg: "url"
	loose: args: {type: "object", properties: {input: {type: "string"}, cmd: {type: "string"}}}
	number: args: {type: "object", properties: input: type: "number"}
	apply_patch: args: {type: "object", required: ["input"], properties: input: type: "string"}
	notes: {args: {type: "object", properties: input: type: "string"}, path_arg: "input"}
}
chains: tool: [{use: "tool_policy", arg_patterns: [{arg: "cmd", pattern: "rm -rf"}]}]`
	call := oaCustomCallSSE("shell", "rm -rf /")
	g := newGatewayWith(t, decls, typicalChain, []reply{{body: call}, {body: call}}, nil)
	for _, tc := range []struct{ tool, want string }{
		{"shell", "its args are not"},
		{"untyped", "its args are not"},
		{"readf", "its args are not"},
		{"fetch", "its args are not"},
		{"loose", "its args are not"},
		{"number", "its args are not"},
	} {
		for _, stream := range []bool{false, true} {
			chat := fmt.Sprintf(`{"model": "primary", "stream": %t, "messages": [{"role": "user", "content": "go"}], "tools": [{"type": "custom", "custom": {"name": %q}}]}`, stream, tc.tool)
			code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(chat))
			requireInvalidRequest(t, code, body, "tools: "+tc.tool+" is offered as a custom tool")
			assert.Contains(t, body, tc.want)
			assert.Contains(t, body, `args: {type: \"object\", required: [\"input\"], properties: input: type: \"string\"}`)
			rs := fmt.Sprintf(`{"model": "primary", "stream": %t, "input": "go", "tools": [{"type": "custom", "name": %q}]}`, stream, tc.tool)
			code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, []byte(rs))
			requireInvalidRequest(t, code, body, "tools: "+tc.tool+" is offered as a custom tool")
		}
	}
	assert.Zero(t, g.oa.requests(), "no refused offer reached the model")

	// Offered as a function, the call is checked as declared.
	fn := `{"model": "primary", "messages": [{"role": "user", "content": "go"}], "tools": [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]}`
	g2 := newGatewayWith(t, decls, typicalChain, []reply{{body: oaToolCallSSE("shell", `{"cmd":"rm -rf /"}`)}}, nil)
	code, _, body := do(t, "POST", g2.url+"/v1/chat/completions", clientKey, []byte(fn))
	require.Equal(t, http.StatusForbidden, code, body)

	// The custom shape, a path_arg naming input, is served.
	for _, tool := range []string{"apply_patch", "notes"} {
		chat := fmt.Sprintf(`{"model": "primary", "messages": [{"role": "user", "content": "go"}], "tools": [{"type": "custom", "custom": {"name": %q}}]}`, tool)
		code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(chat))
		assert.NotEqual(t, http.StatusBadRequest, code, body)
	}
}
