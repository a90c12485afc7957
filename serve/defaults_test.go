package serve

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What common clients send by default, and the harmless hints and
// sampling parameters of one provider's API, are served: relayed to a
// model of that provider, left out for the other's where they change
// nothing (a resolution or cache hint), and refused with a 400 naming the
// field and the model where leaving them out would change the answer.

// TestOpenAIHintsAndPenaltiesReachAnOpenAIModel: an image's detail, the
// penalties, the logit bias, the end user's safety_identifier and the
// prompt_cache_key reach an OpenAI upstream as sent.
func TestOpenAIHintsAndPenaltiesReachAnOpenAIModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: transcript(t, "openai", "text.sse")}}, nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("Which is larger?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png", Detail: "low"}),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/b.png", Detail: "high"}),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/c.png"}),
		})},
		FrequencyPenalty: openai.Float(0.5),
		PresencePenalty:  openai.Float(-0.25),
		LogitBias:        map[string]int64{"50256": -100, "1734": 3},
		User:             openai.String("u-42"),
		SafetyIdentifier: openai.String("h-9f2c"),
		PromptCacheKey:   openai.String("tenant-7/support"),
		Verbosity:        openai.ChatCompletionNewParamsVerbosityLow,
	})
	require.NoError(t, err)
	got := sentTo(t, g.oa, 0)
	assert.Equal(t, "low", got["verbosity"])
	assert.EqualValues(t, 0.5, got["frequency_penalty"])
	assert.EqualValues(t, -0.25, got["presence_penalty"])
	assert.Equal(t, map[string]any{"50256": float64(-100), "1734": float64(3)}, got["logit_bias"])
	assert.Equal(t, "u-42", got["user"])
	assert.Equal(t, "h-9f2c", got["safety_identifier"])
	assert.Equal(t, "tenant-7/support", got["prompt_cache_key"])
	parts := got["messages"].([]any)[0].(map[string]any)["content"].([]any)
	require.Len(t, parts, 4)
	assert.Equal(t, map[string]any{"url": "https://example.com/a.png", "detail": "low"}, parts[1].(map[string]any)["image_url"])
	assert.Equal(t, map[string]any{"url": "https://example.com/b.png", "detail": "high"}, parts[2].(map[string]any)["image_url"])
	assert.Equal(t, map[string]any{"url": "https://example.com/c.png"}, parts[3].(map[string]any)["image_url"])
}

// TestOpenAIHintsOnAClaudeModel: for a Claude model, an image's detail and
// the prompt_cache_key (hints its API has no word for) are left out, the
// safety_identifier is its metadata.user_id, and neutral penalties are
// served; a penalty or a logit bias that asks for something fails the
// call with a 400 naming the field and the model, before any upstream.
func TestOpenAIHintsOnAClaudeModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/a.png", Detail: "high"}),
		})},
		FrequencyPenalty: openai.Float(0),
		PresencePenalty:  openai.Float(0),
		User:             openai.String("u-42"),
		SafetyIdentifier: openai.String("h-9f2c"),
		PromptCacheKey:   openai.String("tenant-7/support"),
	})
	require.NoError(t, err)
	sent := g.an.body(0)
	got := sentTo(t, g.an, 0)
	assert.Equal(t, map[string]any{"user_id": "h-9f2c"}, got["metadata"])
	assert.NotContains(t, sent, "detail")
	assert.NotContains(t, sent, "tenant-7")
	assert.NotContains(t, sent, "penalty")
	image := got["messages"].([]any)[0].(map[string]any)["content"].([]any)[1].(map[string]any)
	assert.Equal(t, map[string]any{"type": "url", "url": "https://example.com/a.png"}, image["source"])

	for field, body := range map[string]string{
		"frequency_penalty 0.5": `"frequency_penalty": 0.5`,
		"presence_penalty 1.5":  `"presence_penalty": 1.5`,
		"logit_bias":            `"logit_bias": {"50256": -100}`,
		"verbosity":             `"verbosity": "low"`,
	} {
		code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
			[]byte(`{"model": "backup", "messages": [{"role": "user", "content": "hi"}], `+body+`}`))
		requireInvalidRequest(t, code, resp, field)
		assert.Contains(t, resp, "claude-sonnet-4-5", field)
	}
	assert.Equal(t, 1, g.an.requests(), "a refused call reached no upstream")
}

// TestOpenAIHintsOutOfBoundsAreRefused: the API's bounds of the penalties,
// the logit bias and an image's detail are a 400 naming the field, for a
// model of either provider, before any upstream.
func TestOpenAIHintsOutOfBoundsAreRefused(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	image := func(detail string) string {
		return `"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "` + detail + `"}}]}]`
	}
	for _, tt := range []struct{ body, field string }{
		{`"frequency_penalty": 2.5`, "frequency_penalty: from -2 to 2, got 2.5"},
		{`"presence_penalty": -3`, "presence_penalty: from -2 to 2, got -3"},
		{`"logit_bias": {"50256": -101}`, `logit_bias["50256"]: from -100 to 100, got -101`},
		{`"logit_bias": {"hello": 1}`, `logit_bias: a key is a token id, in digits, got "hello"`},
		{`"verbosity": "terse"`, `verbosity: want "low", "medium" or "high", got "terse"`},
		{`"logit_bias": {"1": 0.5}`, "logit_bias"},
		{image("ultra"), `messages[0]: content[0].image_url.detail: want "auto", "low" or "high", got "ultra"`},
		{image("original"), `messages[0]: content[0].image_url.detail: "original" is not served`},
	} {
		for _, model := range []string{"primary", "backup"} {
			body := tt.body
			if body[:len(`"messages"`)] != `"messages"` {
				body += `, "messages": [{"role": "user", "content": "hi"}]`
			}
			code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model": "`+model+`", `+body+`}`))
			requireInvalidRequest(t, code, resp, tt.field)
		}
	}
	assert.Zero(t, g.oa.requests()+g.an.requests())
}

// TestClientDefaultBodiesAreServed: the bodies popular clients send with
// their defaults (every field explicit, at its neutral value: older
// LangChain.js sent penalties 0, top_p 1 and n 1; LangChain's Python
// ChatOpenAI stream false; the Agents SDK and LangChain stream_options
// with include_usage when streaming) are served by a model of either
// provider.
func TestClientDefaultBodiesAreServed(t *testing.T) {
	oa, an := transcript(t, "openai", "text.sse"), transcript(t, "anthropic", "text.sse")
	g := newGateway(t, `{use: "tracing"}`, []reply{{body: oa}, {body: oa}}, []reply{{body: an}, {body: an}})
	for _, body := range []string{
		`"temperature": 1, "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0, "n": 1, "stream": false, "logprobs": false,
		 "logit_bias": {}, "store": false, "service_tier": "auto", "user": "", "safety_identifier": null, "prompt_cache_key": null`,
		`"stream": true, "stream_options": {"include_usage": true}, "parallel_tool_calls": true, "top_logprobs": null,
		 "max_completion_tokens": 256, "metadata": {"session": "s-1"}`,
	} {
		for _, model := range []string{"primary", "backup"} {
			code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
				[]byte(`{"model": "`+model+`", "messages": [{"role": "user", "content": "hi"}], `+body+`}`))
			assert.Equal(t, http.StatusOK, code, "%s: %s", model, resp)
		}
	}
	assert.Equal(t, 2, g.oa.requests())
	assert.Equal(t, 2, g.an.requests())
	// A neutral penalty reaches an OpenAI model as sent.
	assert.EqualValues(t, 0, sentTo(t, g.oa, 0)["frequency_penalty"])
	assert.NotContains(t, g.an.body(0), "penalty")
}

// TestTopKReachesAClaudeModel: Anthropic's top_k reaches a Claude model;
// an OpenAI model, whose API has no top_k, fails the call with a 400
// naming it and the model.
func TestTopKReachesAClaudeModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	params := anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	_, err := g.anthropic(t).Messages.New(context.Background(), params, anthropicoption.WithJSONSet("top_k", 5))
	require.NoError(t, err)
	assert.EqualValues(t, 5, sentTo(t, g.an, 0)["top_k"])

	params.Model = "primary"
	_, err = g.anthropic(t).Messages.New(context.Background(), params, anthropicoption.WithJSONSet("top_k", 5))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), "top_k 5")
	assert.Contains(t, ae.RawJSON(), "gpt-4.1-mini")
	assert.Zero(t, g.oa.requests())

	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey,
		[]byte(`{"model": "backup", "max_tokens": 64, "top_k": -1, "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
	requireInvalidRequest(t, code, resp, "top_k: must be at least 0")
	assert.Equal(t, 1, g.an.requests())
}

// TestFallbackToAModelThatCannotHonourAPenalty: an OpenAI model down, and
// a Claude model behind it that cannot honour the request's penalty: the
// client gets the outage (a transient 502 it may retry), not a 400 telling
// it that its request, sound for the model it asked for, is at fault.
func TestFallbackToAModelThatCannotHonourAPenalty(t *testing.T) {
	g := newGateway(t, `{use: "fallback", models: ["primary", "backup"], when: "request.model == 'primary'"}`,
		[]reply{{status: http.StatusServiceUnavailable, body: `{"error":{"message":"overloaded","type":"server_error"}}`}}, nil)
	code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
		[]byte(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "frequency_penalty": 0.5}`))
	assert.Equal(t, http.StatusBadGateway, code, resp)
	assert.Contains(t, resp, `"kind":"transient"`)
	assert.NotContains(t, resp, "frequency_penalty")
	assert.Equal(t, 1, g.oa.requests())
	assert.Zero(t, g.an.requests())
}
