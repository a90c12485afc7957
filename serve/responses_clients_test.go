package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The request bodies of the Responses API's two main clients, as they send
// them, in testdata/responses: the OpenAI Agents SDK (Python,
// OpenAIResponsesModel: include always sent, tools with strict true, and
// for a gpt-5 model its default settings, reasoning.effort and
// text.verbosity; with model settings, an output type and a prompt cache
// key) and Codex (instructions, developer and user messages, its function
// tools, tool_choice auto, parallel_tool_calls, reasoning with a summary,
// store false, stream, include reasoning.encrypted_content,
// prompt_cache_key, text.verbosity, client_metadata; reasoning null and a
// reasoning item sent back for a model without reasoning summaries).

func rsFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	require.NoError(t, err)
	return b
}

// rsSend sends a client's request body as it is, through the SDK (which
// reads the answer), streamed.
func rsSend(t *testing.T, g *gateway, body []byte) (*responses.ResponseAccumulator, []string, error) {
	t.Helper()
	stream := g.openai(t).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{},
		option.WithRequestBody("application/json", body))
	return rsStream(t, stream)
}

func TestResponsesAgentsSDKRequests(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})

	// A gpt-5 model's defaults, after a function call: streamed.
	acc, _, err := rsSend(t, g, rsFixture(t, "agents_python_gpt5.json"))
	require.NoError(t, err)
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", final.OutputText())
	assert.Equal(t, responses.ResponseStatusCompleted, final.Status)
	var up struct {
		Verbosity       string `json:"verbosity"`
		ReasoningEffort string `json:"reasoning_effort"`
		Messages        []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name   string `json:"name"`
				Strict bool   `json:"strict"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal([]byte(g.oa.body(0)), &up), g.oa.body(0))
	assert.Equal(t, "low", up.Verbosity, "text.verbosity reaches an OpenAI model")
	assert.Equal(t, "none", up.ReasoningEffort)
	require.Len(t, up.Messages, 4, g.oa.body(0))
	assert.Equal(t, "system", up.Messages[0].Role)
	assert.Equal(t, "tool", up.Messages[3].Role)
	assert.Equal(t, "call_DdmO9pD3xa9XTPNJ32zg2hcA", up.Messages[3].ToolCallID)
	assert.Equal(t, "18C and sunny", up.Messages[3].Content)
	require.Len(t, up.Tools, 1)
	assert.True(t, up.Tools[0].Function.Strict)

	// Model settings and an output type, on a Claude model, not streamed.
	resp, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{},
		option.WithRequestBody("application/json", rsFixture(t, "agents_python_settings.json")))
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", resp.OutputText())
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, "T-7", resp.Metadata["ticket"])
	an := g.an.body(0)
	assert.Contains(t, an, `"output_config":{"format":{"type":"json_schema"`)
	assert.Contains(t, an, `"temperature":0.3`)
	assert.Contains(t, an, `"max_tokens":100`)
	assert.NotContains(t, an, "T-7", "metadata stays at the gateway")
	assert.NotContains(t, an, "agents-run-1c2d", "a Claude model has no prompt cache key")
}

// TestResponsesVerbosityOnAClaudeModel: text.verbosity sets how long the
// answer runs, which no parameter of a Claude model does: the call is a
// 400 naming it, not an answer of another length.
func TestResponsesVerbosityOnAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "backup", "input": "hi", "text": {"verbosity": "low"}}`))
	require.Equal(t, http.StatusBadRequest, code, body)
	_, ecode, _, msg := openAIError(t, body)
	assert.Equal(t, "permanent", ecode)
	assert.Contains(t, msg, `verbosity "low"`)
	assert.Contains(t, msg, "claude-sonnet-4-5", "the model that cannot honour it")
	assert.Zero(t, g.an.requests())

	code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": "hi", "text": {"verbosity": "terse"}}`))
	require.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, `text.verbosity: want \"low\", \"medium\" or \"high\", got \"terse\"`)
}

// codexDecls declares Codex's function tools: the policy's tool chain
// checks what the client offers.
const codexDecls = `tools: {
	shell_command: args: {type: "object", required: ["command"], properties: {command: {type: "string"}, workdir: {type: "string"}, timeout_ms: {type: "number"}}}
	update_plan: {}
	apply_patch: args: {type: "object", required: ["input"], properties: input: type: "string"}
}`

func TestResponsesCodexRequests(t *testing.T) {
	g := newGatewayWith(t, codexDecls, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})

	acc, _, err := rsSend(t, g, rsFixture(t, "codex.json"))
	require.NoError(t, err)
	final, err := acc.ReconstructedResponse()
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", final.OutputText())
	up := g.oa.body(0)
	assert.Contains(t, up, `"verbosity":"low"`)
	assert.Contains(t, up, `"reasoning_effort":"medium"`)
	assert.Contains(t, up, `"parallel_tool_calls":false`)
	assert.Contains(t, up, `"prompt_cache_key":"0199a213-81c0-7800-8aa1-bbab2a035a53"`)
	assert.Contains(t, up, `{"role":"system","content":"<permissions instructions>`, "a developer message is a system message")
	assert.Contains(t, up, `"tool_call_id":"call_7Kx2"`)
	assert.NotContains(t, up, "5b3c1f0e", "client_metadata stays at the gateway")

	// A model without reasoning summaries (reasoning null), with a
	// reasoning item the gateway returned sent back in its turn.
	acc, _, err = rsSend(t, g, rsFixture(t, "codex_claude.json"))
	require.NoError(t, err)
	final, err = acc.ReconstructedResponse()
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", final.OutputText())
	an := g.an.body(0)
	assert.Contains(t, an, `{"type":"thinking","thinking":"I should list the files.","signature":"EqQBCkgIAxABGAIiQLwz"}`)
	assert.Contains(t, an, `{"type":"text","text":"Listing them."}`)
	assert.Contains(t, an, `"tool_use_id":"toolu_01A"`)
	assert.NotContains(t, an, "commentary", "a message's phase describes it")

}

// TestResponsesStoredRoutes: the routes of a stored response answer that
// the gateway keeps none, in the API's error format, to a caller with a key.
func TestResponsesStoredRoutes(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/responses/resp_123"}, {"DELETE", "/v1/responses/resp_123"},
		{"GET", "/v1/responses/resp_123/input_items"}, {"POST", "/v1/responses/resp_123/cancel"},
	} {
		code, _, body := do(t, r.method, g.url+r.path, clientKey, nil)
		require.Equal(t, http.StatusNotFound, code, "%s %s: %s", r.method, r.path, body)
		typ, ecode, _, msg := openAIError(t, body)
		assert.Equal(t, "not_found_error", typ)
		assert.Equal(t, "not_found", ecode)
		assert.Contains(t, msg, `response "resp_123": the gateway keeps no responses`)
		code, _, _ = do(t, r.method, g.url+r.path, "", nil)
		assert.Equal(t, http.StatusUnauthorized, code, "%s %s without a key", r.method, r.path)
	}
	_, err := g.openai(t).Responses.Get(context.Background(), "resp_123", responses.ResponseGetParams{})
	var oe *openai.Error
	require.True(t, errors.As(err, &oe), "got %v", err)
	assert.Equal(t, http.StatusNotFound, oe.StatusCode)
	assert.Contains(t, oe.Message, "the gateway keeps no responses")
	assert.Contains(t, g.metrics(t), `route="responses_stored"`)
}

// rsTerminal returns the response of a raw stream's last event.
func rsTerminal(t *testing.T, stream string) (string, responses.Response) {
	t.Helper()
	var last string
	for _, line := range strings.Split(stream, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	var ev struct {
		Type     string             `json:"type"`
		Response responses.Response `json:"response"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &ev), last)
	return ev.Type, ev.Response
}

// TestResponsesCutItemIncomplete: the item being written when the stream
// failed, or when the answer was cut at the output bound, is incomplete,
// not completed.
func TestResponsesCutItemIncomplete(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "error_mid_stream.sse")}},
		[]reply{{body: anthropicStopping("max_tokens")}, {body: anthropicStopping("max_tokens")}})
	code, _, body := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "primary", "input": "hi", "stream": true}`))
	require.Equal(t, http.StatusOK, code)
	typ, resp := rsTerminal(t, body)
	assert.Equal(t, "response.failed", typ)
	require.Len(t, resp.Output, 1, body)
	assert.Equal(t, "The answer is", resp.Output[0].Content[0].Text)
	assert.Equal(t, "incomplete", string(resp.Output[0].Status))

	code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "backup", "input": "hi", "stream": true}`))
	require.Equal(t, http.StatusOK, code)
	typ, resp = rsTerminal(t, body)
	assert.Equal(t, "response.incomplete", typ)
	require.Len(t, resp.Output, 1, body)
	assert.Equal(t, "incomplete", string(resp.Output[0].Status))
	assert.Contains(t, body, `"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":`)
	assert.Equal(t, 2, strings.Count(body, `"status":"incomplete","role":"assistant"`), "output_item.done and response.incomplete")

	r, err := g.openai(t).Responses.New(context.Background(), responses.ResponseNewParams{Model: "backup", Input: rsText("hi")})
	require.NoError(t, err)
	assert.Equal(t, responses.ResponseStatusIncomplete, r.Status)
	require.Len(t, r.Output, 1)
	assert.Equal(t, "incomplete", string(r.Output[0].Status))
}

// TestResponsesReasoningEffortOnAClaudeModel: the 400 named
// reasoning_effort and suggested thinking: {type: enabled, ...}, neither a
// field of the Responses API. It names reasoning.effort, as the client
// wrote it, in its message and its param, and suggests nothing the route
// has no field for. text.verbosity is named so too.
func TestResponsesReasoningEffortOnAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	for _, stream := range []string{"false", "true"} {
		for field, body := range map[string]string{
			"reasoning.effort": `"reasoning": {"effort": "low"}`,
			"text.verbosity":   `"text": {"verbosity": "low"}`,
		} {
			code, _, resp := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "backup", "input": "hi", "stream": `+stream+`, `+body+`}`))
			require.Equal(t, http.StatusBadRequest, code, resp)
			var e struct {
				Error struct {
					Message string
					Param   *string
				}
			}
			require.NoError(t, json.Unmarshal([]byte(resp), &e), resp)
			assert.Contains(t, e.Error.Message, `the request sets `+field+` "low", which an Anthropic model cannot honour`)
			assert.NotContains(t, e.Error.Message, "thinking")
			assert.NotContains(t, e.Error.Message, "reasoning_effort")
			if assert.NotNil(t, e.Error.Param, resp) {
				assert.Equal(t, field, *e.Error.Param)
			}
		}
	}
	assert.Zero(t, g.an.requests())
}

// TestChatCompletionsReasoningEffortOnAClaudeModel: the 400 suggested
// thinking: {type: enabled, ...}, which the Chat Completions route refuses
// as a field it does not carry. It names reasoning_effort and suggests
// nothing the route has no field for.
func TestChatCompletionsReasoningEffortOnAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, nil)
	for _, stream := range []string{"false", "true"} {
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "backup", "stream": `+stream+`, "reasoning_effort": "low", "messages": [{"role": "user", "content": "hi"}]}`))
		require.Equal(t, http.StatusBadRequest, code, resp)
		var e struct {
			Error struct {
				Message string
				Param   *string
			}
		}
		require.NoError(t, json.Unmarshal([]byte(resp), &e), resp)
		assert.Contains(t, e.Error.Message, `the request sets reasoning_effort "low", which an Anthropic model cannot honour`)
		assert.NotContains(t, e.Error.Message, "thinking")
		if assert.NotNil(t, e.Error.Param, resp) {
			assert.Equal(t, "reasoning_effort", *e.Error.Param)
		}
	}
	assert.Zero(t, g.an.requests())
}
