package serve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProposedCallCutByTheUpstreamIsAnUpstreamFailure: a call whose
// arguments the upstream cut (not JSON at all) was refused as a policy
// block (403 permission_error, layer tools), which a client cannot tell
// from a real one. It is the upstream's failure: a 502 in the route's
// format, streamed or not, on every route, no fragment of the call
// relayed and no refusal counted; arguments that are JSON but break the
// declared schema stay a block (TestProposedToolCallsAreAdmittedBeforeTheyAreRelayed).
func TestProposedCallCutByTheUpstreamIsAnUpstreamFailure(t *testing.T) {
	const cut = `{"location":"Par`
	oa := make([]reply, 4)
	for i := range oa {
		oa[i] = reply{body: oaToolCallSSE("get_weather", cut)}
	}
	an := []reply{{body: anToolUseSSE("get_weather", cut)}, {body: anToolUseSSE("get_weather", cut)}}
	g := newGatewayWith(t, proposalDecls, typicalChain, oa, an)
	for _, stream := range []bool{false, true} {
		s := strconv.FormatBool(stream)
		for _, route := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"primary","stream":` + s + `,"messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`},
			{"responses", "/v1/responses", `{"model":"primary","stream":` + s + `,"input":"go","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`},
			{"messages", "/v1/messages", `{"model":"backup","max_tokens":64,"stream":` + s + `,"messages":[{"role":"user","content":"go"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`},
		} {
			code, _, body := do(t, "POST", g.url+route.path, clientKey, []byte(route.body), "anthropic-version", "2023-06-01")
			if !stream {
				assert.Equal(t, http.StatusBadGateway, code, "%s: %s", route.name, body)
			}
			assert.Contains(t, body, "not complete JSON", "%s stream=%v", route.name, stream)
			assert.NotContains(t, body, "blocked", "%s stream=%v: not a policy block", route.name, stream)
			assert.NotContains(t, body, "permission_error", "%s stream=%v", route.name, stream)
			for _, fragment := range []string{`"tool_calls"`, `"function_call"`, `"tool_use"`, `input_json_delta`} {
				assert.NotContains(t, body, fragment, "%s stream=%v: no fragment of the call is relayed", route.name, stream)
			}
		}
	}
	assert.NotContains(t, g.metrics(t), `agentc_serve_blocks_total{layer="tools"`)
}

// TestProposedCallCutIsTriedAgainByTheChain: the cut call was found once
// the chat chain had returned, so a retry or a fallback of the policy
// never saw the failure and the client got a 502 the policy said to try
// again. The runtime holds the calls until the answer ends and fails a
// cut one below the chain's layers: with a retry the client gets the whole
// call of the second answer, the upstream having seen two requests; with a
// fallback across providers the backup answers; with neither, a 502 as
// before. Streamed or not, no fragment of the cut call reaches the client.
func TestProposedCallCutIsTriedAgainByTheChain(t *testing.T) {
	const cut, whole = `{"location":"Par`, `{"location":"Paris"}`
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("get_weather")}}
	for _, tc := range []struct {
		name, chain    string
		oa, an         []reply
		oaSeen, anSeen int
		id             string // the id of the call the client gets; "" when it gets a 502
	}{
		{name: "retry", chain: `{use: "retry", max_attempts: 2, initial_delay: "1ms", max_delay: "1ms"}`,
			oa: []reply{{body: oaCallSSE("", "get_weather", cut, "tool_calls")}, {body: oaCallSSE("", "get_weather", whole, "tool_calls")}}, oaSeen: 2, id: "call_1"},
		{name: "fallback", chain: `{use: "fallback", models: ["primary", "backup"]}`,
			oa: []reply{{body: oaCallSSE("", "get_weather", cut, "tool_calls")}}, an: []reply{{body: anCallSSE("", "get_weather", whole)}}, oaSeen: 1, anSeen: 1, id: "toolu_1"},
		{name: "neither", oa: []reply{{body: oaCallSSE("", "get_weather", cut, "tool_calls")}}, oaSeen: 1},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(tc.name+" stream="+strconv.FormatBool(stream), func(t *testing.T) {
				g := newGatewayWith(t, proposalDecls, tc.chain, tc.oa, tc.an)
				var calls []openai.ChatCompletionMessageToolCallUnion
				var err error
				if stream {
					s := g.openai(t).Chat.Completions.NewStreaming(context.Background(), params)
					var acc openai.ChatCompletionAccumulator
					for s.Next() {
						acc.AddChunk(s.Current())
					}
					err = s.Err()
					if len(acc.Choices) > 0 {
						calls = acc.Choices[0].Message.ToolCalls
					}
				} else {
					var c *openai.ChatCompletion
					c, err = g.openai(t).Chat.Completions.New(context.Background(), params)
					if err == nil {
						calls = c.Choices[0].Message.ToolCalls
					}
				}
				assert.Equal(t, tc.oaSeen, g.oa.requests(), "requests the openai upstream saw")
				assert.Equal(t, tc.anSeen, g.an.requests(), "requests the anthropic upstream saw")
				if tc.id == "" {
					var oerr *openai.Error
					require.ErrorAs(t, err, &oerr)
					assert.Equal(t, http.StatusBadGateway, oerr.StatusCode)
					assert.Contains(t, oerr.RawJSON(), "not complete JSON")
					assert.Empty(t, calls, "no fragment of the cut call is relayed")
					return
				}
				require.NoError(t, err)
				require.Len(t, calls, 1)
				assert.Equal(t, tc.id, calls[0].ID)
				assert.JSONEq(t, whole, calls[0].Function.Arguments)
			})
		}
	}
}

// TestProposedCallCutAtTheTokenLimit: a call the model cut because it
// reached max_tokens (finish reason length) is cut again by any model
// asked with that limit: a 400 naming max_tokens, neither retried nor
// moved on from.
func TestProposedCallCutAtTheTokenLimit(t *testing.T) {
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: oaCallSSE("", "get_weather", `{"location":"Par`, "length")}}, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:     []openai.ChatCompletionToolUnionParam{proposalTool("get_weather")},
		MaxTokens: openai.Int(8)})
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusBadRequest, oerr.StatusCode)
	assert.Contains(t, oerr.RawJSON(), "raise max_tokens")
	assert.Equal(t, 1, g.oa.requests())
	assert.Zero(t, g.an.requests())
}

// TestProposedCallCutAtTheClientsBound: a request without max_tokens to a
// Claude model, whose client sends 4096, was told it asked for 0 and that
// 0 is the provider's default. The 400 names the bound sent.
func TestProposedCallCutAtTheClientsBound(t *testing.T) {
	cut := strings.Replace(anCallSSE("", "get_weather", `{"location":"Par`), `"stop_reason":"tool_use"`, `"stop_reason":"max_tokens"`, 1)
	g := newGatewayWith(t, proposalDecls, `{use: "tracing"}`, nil, []reply{{body: cut}})
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("get_weather")}})
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusBadRequest, oerr.StatusCode)
	assert.Contains(t, oerr.RawJSON(), "the request sets none, and the model's client sent its default, 4096")
	assert.Contains(t, g.an.body(0), `"max_tokens":4096`)
}

// TestProposedCallMalformedIsNotCalledCut: arguments the model wrote
// wrong (single quotes) are not JSON but were not cut: the 502 said the
// answer was cut inside them. It says they are not JSON.
func TestProposedCallMalformedIsNotCalledCut(t *testing.T) {
	const bad = `{'location': 'Paris'}`
	g := newGatewayWith(t, proposalDecls, typicalChain, []reply{{body: oaToolCallSSE("get_weather", bad)}}, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model":"primary","messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`))
	assert.Equal(t, http.StatusBadGateway, code, body)
	assert.Contains(t, body, "holds arguments that are not JSON")
	assert.NotContains(t, body, "complete JSON")
}
