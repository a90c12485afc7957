package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// codexCompactBody is the body Codex sends to POST /v1/responses/compact
// when its provider is OpenAI's (a base_url set for the built-in
// provider): the conversation of a turn it sent (serve/testdata/responses),
// with no tools, as its compaction request carries it.
func codexCompactBody(t *testing.T, fixture string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/responses/" + fixture)
	require.NoError(t, err)
	var turn map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &turn))
	body := map[string]json.RawMessage{"tools": json.RawMessage(`[]`), "parallel_tool_calls": json.RawMessage(`false`)}
	for _, k := range []string{"model", "instructions", "input", "reasoning", "prompt_cache_key"} {
		body[k] = turn[k]
	}
	out, err := json.Marshal(body)
	require.NoError(t, err)
	return out
}

// Codex compacts a long conversation with POST /v1/responses/compact when
// its provider is OpenAI's, and the gateway answered "no route": Codex
// reported the error and the conversation grew until the model refused
// it. The route is a model call through the chat chain (keys, budgets,
// guards, fallback as on /v1/responses): the model summarizes the
// conversation, and the answer is the API's compacted response, the
// user's messages followed by the summary, which Codex keeps as its new
// history.
func TestResponsesCompactRunsThroughTheChatChain(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	question := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	answer := responses.ResponseInputItemParamOfMessage("It is sunny.", responses.EasyInputMessageRoleAssistant)
	again := responses.ResponseInputItemParamOfMessage("And in Lyon?", responses.EasyInputMessageRoleUser)
	c, err := g.openai(t).Responses.Compact(context.Background(), responses.ResponseCompactParams{Model: "primary",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseCompactParamsInputUnion{OfResponseInputItemArray: []responses.ResponseInputItemUnionParam{question, answer, again}}})
	require.NoError(t, err)
	assert.Equal(t, "response.compaction", string(c.Object))
	require.Len(t, c.Output, 3, c.RawJSON())
	for i, want := range []string{"What is the weather in Paris?", "And in Lyon?"} {
		assert.Equal(t, "user", gjson.Get(c.Output[i].RawJSON(), "role").String())
		assert.Equal(t, want, gjson.Get(c.Output[i].RawJSON(), "content").String(), "as the client sent it")
	}
	summary := c.Output[2].AsMessage()
	assert.Equal(t, "assistant", string(summary.Role))
	require.Len(t, summary.Content, 1)
	assert.Equal(t, "Hello! How can I help you today?", summary.Content[0].Text)
	assert.Positive(t, c.Usage.InputTokens)
	assert.Positive(t, c.Usage.OutputTokens)

	// The model was asked for the summary after the conversation, and
	// offered no tools.
	up := g.oa.body(0)
	msgs := gjson.Get(up, "messages").Array()
	require.Len(t, msgs, 5, up)
	assert.Equal(t, "Be brief.", msgs[0].Get("content").String())
	assert.Equal(t, compactPrompt, msgs[4].Get("content").String())
	assert.False(t, gjson.Get(up, "tools").Exists())

	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_requests_total{code="200",model="primary",route="responses_compact"} 1`)
	assert.Contains(t, m, `agentc_serve_budget_spend_usd_total{model="primary",tenant="acme"}`)

	// The chain's guard reads the conversation: refused before any model.
	code, _, body := do(t, "POST", g.url+"/v1/responses/compact", clientKey,
		[]byte(`{"model": "primary", "input": [{"role": "user", "content": "my password is hunter2"}]}`))
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Equal(t, "no_passwords", gjson.Get(body, "error.layer").String(), body)
	assert.Equal(t, 1, g.oa.requests())
}

// Codex's own compaction requests compact on either provider's model. On
// a Claude model, its history of function calls, offered no tools, is one
// the Messages API refuses unless the tools are declared, which the
// provider does. The answer keeps the user's messages, not the developer
// message, the reasoning, the answers nor the calls.
func TestCodexCompaction(t *testing.T) {
	g := newGatewayWith(t, codexDecls, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	for fixture, users := range map[string][]string{
		"codex.json":        {"<environment_context>", "List the files here."},
		"codex_claude.json": {"List the files here."},
	} {
		code, _, body := do(t, "POST", g.url+"/v1/responses/compact", clientKey, codexCompactBody(t, fixture))
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, "response.compaction", gjson.Get(body, "object").String())
		out := gjson.Get(body, "output").Array()
		require.Len(t, out, len(users)+1, body)
		for i, want := range users {
			assert.Equal(t, "user", out[i].Get("role").String())
			assert.Contains(t, out[i].Get("content.0.text").String(), want)
		}
		assert.Equal(t, "assistant", out[len(users)].Get("role").String())
		assert.NotEmpty(t, out[len(users)].Get("content.0.text").String())
	}
	up := g.an.body(0)
	assert.Equal(t, "shell_command", gjson.Get(up, "tools.0.name").String(), up)
	assert.Equal(t, "none", gjson.Get(up, "tool_choice.type").String())
	assert.False(t, gjson.Get(g.oa.body(0), "tools").Exists())
}

// What a compaction cannot honour is a 400 naming the field: a stream (the
// API answers a compaction whole) and tools (a summary calls none).
func TestResponsesCompactRefusals(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	for body, field := range map[string]string{
		`{"model": "primary", "input": "hi", "stream": true}`:                                                                           "stream",
		`{"model": "primary", "input": "hi", "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}`: "tools",
	} {
		code, _, resp := do(t, "POST", g.url+"/v1/responses/compact", clientKey, []byte(body))
		assert.Equal(t, http.StatusBadRequest, code, resp)
		assert.Contains(t, gjson.Get(resp, "error.message").String(), field+":", resp)
	}
	code, _, _ := do(t, "POST", g.url+"/v1/responses/compact", "not-a-key", []byte(`{"model": "primary", "input": "hi"}`))
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, 0, g.oa.requests()+g.an.requests())
}

// A summary cut at the output bound is less than a summary: the client
// gets a 502 and keeps its conversation, rather than one compacted to
// part of what it held.
func TestCutSummaryIsNoCompaction(t *testing.T) {
	cut := strings.ReplaceAll(transcript(t, "openai", "text.sse"), `"finish_reason":"stop"`, `"finish_reason":"length"`)
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: cut}}, nil)
	code, _, body := do(t, "POST", g.url+"/v1/responses/compact", clientKey, []byte(`{"model": "primary", "input": "hi"}`))
	assert.Equal(t, http.StatusBadGateway, code, body)
	assert.Contains(t, gjson.Get(body, "error.message").String(), "cut short (length): the conversation is not compacted")
	assert.Equal(t, "permanent", gjson.Get(body, "error.kind").String())
}
