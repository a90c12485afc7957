package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// sdkError is what a client's SDK reads of an error body.
type sdkError struct {
	status                       int
	typ, code, param, kind, text string
}

// openAIErrorOf calls model with the OpenAI SDK, which must fail, and
// returns what it read of the error (param "" for a null one).
func (g *gateway) openAIErrorOf(t *testing.T, model string) sdkError {
	t.Helper()
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	if oe.Param == "" {
		assert.Equal(t, "null", oe.JSON.Param.Raw(), "a param the upstream did not give is null")
	}
	g.noLeak(t, oe.RawJSON())
	return sdkError{status: oe.StatusCode, typ: oe.Type, code: oe.Code, param: oe.Param,
		kind: gjson.Parse(oe.JSON.ExtraFields["kind"].Raw()).String(), text: oe.Message}
}

// anthropicErrorOf calls model with the Anthropic SDK, which must fail,
// and returns what it read of the error.
func (g *gateway) anthropicErrorOf(t *testing.T, model string) sdkError {
	t.Helper()
	_, err := g.anthropic(t).Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	g.noLeak(t, ae.RawJSON())
	return sdkError{status: ae.StatusCode, typ: string(ae.Type()), code: gjson.Get(ae.RawJSON(), "error.code").String(),
		kind: gjson.Get(ae.RawJSON(), "error.kind").String(), text: ae.Message}
}

// TestUpstreamErrorDetailsReachTheSDKs: an upstream's error reaches each
// client's SDK with the status and the gateway's class (kind) as
// documented, and with the upstream's own details where the client's API
// can hold them: an OpenAI client of an OpenAI model gets the code, type
// and param of a request it refused; an Anthropic client of a Claude model
// its error type; across providers, a context too long is
// context_length_exceeded for an OpenAI client and "prompt is too long"
// for an Anthropic one, an overloaded upstream overloaded_error; a vLLM
// server's error without OpenAI's wrapping keeps its message. An
// upstream that refused the gateway itself (its key, its account's quota
// or credit, its model id) passes none of its details on.
func TestUpstreamErrorDetailsReachTheSDKs(t *testing.T) {
	echoesKey := `{"error":{"message":"Invalid value for 'user': ` + openAIKey + `","type":"invalid_request_error","param":"` + openAIKey + `","code":"invalid_value"}}`
	tooLarge := `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	cases := []struct {
		name     string
		model    string // primary: an OpenAI model; backup: a Claude model
		reply    reply
		oa, an   sdkError
		anPrefix string // the start of the Anthropic client's message
	}{
		{name: "openai context length", model: "primary", reply: reply{status: 400, body: transcript(t, "openai", "400_context_length.json")},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", kind: "permanent",
				text: "This model's maximum context length is 128000 tokens"},
			an:       sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "This model's maximum context length"},
			anPrefix: "prompt is too long: openai gpt-4.1-mini: 400 Bad Request"},
		{name: "openai unsupported parameter", model: "primary", reply: reply{status: 400, body: transcript(t, "openai", "400_unsupported_parameter.json")},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "unsupported_parameter", param: "max_tokens", kind: "permanent",
				text: "Unsupported parameter: 'max_tokens'"},
			an:       sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "Unsupported parameter"},
			anPrefix: "openai gpt-4.1-mini: 400 Bad Request"},
		{name: "openai error echoing the key", model: "primary", reply: reply{status: 400, body: echoesKey},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "invalid_value", param: "[redacted]", kind: "permanent",
				text: "Invalid value for 'user': [redacted]"},
			an: sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "[redacted]"}},
		{name: "vLLM unwrapped error", model: "primary", reply: reply{status: 400, body: `{"object":"error","message":"max_tokens must be at least 1, got 0 (` + openAIKey + `)","type":"BadRequestError","param":null,"code":400}`},
			oa:       sdkError{status: 400, typ: "BadRequestError", code: "permanent", kind: "permanent", text: "max_tokens must be at least 1, got 0 ([redacted])"},
			an:       sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "max_tokens must be at least 1, got 0 ([redacted])"},
			anPrefix: "openai gpt-4.1-mini: 400 Bad Request"},
		{name: "anthropic prompt too long", model: "backup", reply: reply{status: 400, body: transcript(t, "anthropic", "400_prompt_too_long.json")},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", kind: "permanent",
				text: "prompt is too long: 210364 tokens > 200000 maximum"},
			an: sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "prompt is too long: 210364 tokens"}},
		{name: "anthropic context limit", model: "backup", reply: reply{status: 400, body: transcript(t, "anthropic", "400_context_limit.json")},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", kind: "permanent", text: "exceed context limit"},
			an: sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "exceed context limit"}},
		{name: "anthropic request too large", model: "backup", reply: reply{status: 413, body: tooLarge},
			oa: sdkError{status: 400, typ: "invalid_request_error", code: "permanent", kind: "permanent", text: "Request exceeds the maximum"},
			an: sdkError{status: 400, typ: "request_too_large", code: "permanent", kind: "permanent", text: "Request exceeds the maximum"}},
		{name: "anthropic overloaded", model: "backup", reply: reply{status: 529, body: transcript(t, "anthropic", "529.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "transient", kind: "transient", text: "529 Overloaded"},
			an: sdkError{status: 502, typ: "overloaded_error", code: "transient", kind: "transient", text: "529 Overloaded"}},
		{name: "openai overloaded", model: "primary", reply: reply{status: 503, body: transcript(t, "openai", "503_overloaded.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "transient", kind: "transient", text: "currently overloaded"},
			an: sdkError{status: 502, typ: "overloaded_error", code: "transient", kind: "transient", text: "currently overloaded"}},
		{name: "openai rate limit", model: "primary", reply: reply{status: 429, body: transcript(t, "openai", "429.json")},
			oa: sdkError{status: 429, typ: "rate_limit_error", code: "rate_limited", kind: "rate_limited", text: "Rate limit reached"},
			an: sdkError{status: 429, typ: "rate_limit_error", code: "rate_limited", kind: "rate_limited", text: "Rate limit reached"}},
		{name: "anthropic rate limit", model: "backup", reply: reply{status: 429, body: transcript(t, "anthropic", "429.json")},
			oa: sdkError{status: 429, typ: "rate_limit_error", code: "rate_limited", kind: "rate_limited", text: "exceed the rate limit"},
			an: sdkError{status: 429, typ: "rate_limit_error", code: "rate_limited", kind: "rate_limited", text: "exceed the rate limit"}},
		{name: "openai key refused", model: "primary", reply: reply{status: 401, body: transcript(t, "openai", "401.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "permanent", kind: "permanent", text: "refused the gateway's credentials"},
			an: sdkError{status: 502, typ: "api_error", code: "permanent", kind: "permanent", text: "refused the gateway's credentials"}},
		{name: "openai quota", model: "primary", reply: reply{status: 429, body: transcript(t, "openai", "429_insufficient_quota.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "permanent", kind: "permanent", text: "429 Too Many Requests"},
			an: sdkError{status: 502, typ: "api_error", code: "permanent", kind: "permanent", text: "429 Too Many Requests"}},
		{name: "openai model not found", model: "primary", reply: reply{status: 404, body: transcript(t, "openai", "404_model_not_found.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "permanent", kind: "permanent", text: "404 Not Found"},
			an: sdkError{status: 502, typ: "api_error", code: "permanent", kind: "permanent", text: "404 Not Found"}},
		{name: "anthropic billing", model: "backup", reply: reply{status: 402, body: transcript(t, "anthropic", "402_billing.json")},
			oa: sdkError{status: 502, typ: "server_error", code: "permanent", kind: "permanent", text: "refused the gateway's credentials"},
			an: sdkError{status: 502, typ: "api_error", code: "permanent", kind: "permanent", text: "refused the gateway's credentials"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replies := []reply{tc.reply, tc.reply}
			var g *gateway
			if tc.model == "primary" {
				g = newGateway(t, `{use: "tracing"}`, replies, nil)
			} else {
				g = newGateway(t, `{use: "tracing"}`, nil, replies)
			}
			oa := g.openAIErrorOf(t, tc.model)
			assert.Contains(t, oa.text, tc.oa.text)
			oa.text = tc.oa.text
			assert.Equal(t, tc.oa, oa, "the OpenAI client's error")

			an := g.anthropicErrorOf(t, tc.model)
			assert.Contains(t, an.text, tc.an.text)
			assert.True(t, strings.HasPrefix(an.text, tc.anPrefix), "%q opens %q", tc.anPrefix, an.text)
			if tc.model == "primary" && !strings.HasPrefix(tc.anPrefix, promptTooLong) {
				assert.NotContains(t, an.text, promptTooLong)
			}
			an.text = tc.an.text
			assert.Equal(t, tc.an, an, "the Anthropic client's error")
		})
	}
}

// TestStreamedUpstreamErrorDetails: the same details reach a streaming
// client, whether the failure comes before the stream (a status and a
// body) or in it (the API's error event).
func TestStreamedUpstreamErrorDetails(t *testing.T) {
	ctx := context.Background()
	g := newGateway(t, `{use: "tracing"}`, []reply{{status: 400, body: transcript(t, "openai", "400_context_length.json")}},
		[]reply{{body: transcript(t, "anthropic", "error_mid_stream.sse")}, {body: transcript(t, "anthropic", "error_mid_stream.sse")}})

	s := g.openai(t).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for s.Next() {
	}
	var oe *openai.Error
	require.ErrorAs(t, s.Err(), &oe)
	assert.Equal(t, http.StatusBadRequest, oe.StatusCode)
	assert.Equal(t, "context_length_exceeded", oe.Code)
	assert.Equal(t, "messages", oe.Param)

	as := g.anthropic(t).Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	text := ""
	for as.Next() {
		if d, ok := as.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			text += d.Delta.Text
		}
	}
	assert.Equal(t, "Once upon a time", text)
	var ae *anthropic.Error
	require.ErrorAs(t, as.Err(), &ae)
	assert.Equal(t, anthropic.ErrorType("overloaded_error"), ae.Type(), "the upstream's own event type, mid-stream")
	assert.Equal(t, "transient", gjson.Get(ae.RawJSON(), "error.kind").String())

	os := g.openai(t).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "backup",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for os.Next() {
	}
	require.Error(t, os.Err())
	assert.Contains(t, os.Err().Error(), "overloaded_error: Overloaded", "an OpenAI client's stream error names the upstream's failure")
}

// TestUpstreamErrorDetailsBehindTheLayers: behind a meter, a rate limit, a
// guard, fallback and retry, the upstream's details still reach the
// client: a refused request is not retried, nor passed to the next model.
func TestUpstreamErrorDetailsBehindTheLayers(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{status: 400, body: transcript(t, "openai", "400_context_length.json")}}, nil)
	oa := g.openAIErrorOf(t, "primary")
	assert.Equal(t, sdkError{status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages", kind: "permanent"},
		sdkError{status: oa.status, typ: oa.typ, code: oa.code, param: oa.param, kind: oa.kind})
	assert.Equal(t, 1, g.oa.requests())
	assert.Zero(t, g.an.requests())
}

// The 429 bodies OpenAI and Anthropic answer when the gateway's account is
// over its rate limit: their messages name the account.
const (
	openAIRateLimitBody = `{
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-AbC123dEf456GhI789jKlMnO on tokens per min (TPM): Limit 30000, Used 29760, Requested 1542. Please try again in 2.604s. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }
}`
	openAIProjectRateLimitBody = `{"error": {"message": "Rate limit reached for gpt-4o in project proj_Q8rTn2VxW5yZ0aB3cD6eF9gH on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`
	anthropicRateLimitBody     = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (ba4ee1f1-7b46-4de8-a6cd-6e7c9ca1e2a4) of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."}}`
	// Anthropic's later wording names the organization after "org:".
	anthropicOrgRateLimitBody = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: 80162711-722b-4454-ae75-c6334e6796f2, model: claude-sonnet-4-5). For details, refer to: https://docs.claude.com/en/api/rate-limits."}}`
)

// TestUpstreamAccountIDsAreNotRelayed: an upstream's rate limit message
// reaches the client (of either API, streamed or not) without the ids of
// the gateway's account it names (OpenAI's organization and project,
// Anthropic's organization), the rest of the message kept.
func TestUpstreamAccountIDsAreNotRelayed(t *testing.T) {
	limited := func(body string) []reply {
		r := reply{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "3"}, body: body}
		return []reply{r, r, r, r, r, r}
	}
	for _, tt := range []struct {
		name, model, body, secret string
		kept                      []string
	}{
		{"openai organization", "primary", openAIRateLimitBody, "org-AbC123dEf456GhI789jKlMnO",
			[]string{"Rate limit reached for gpt-4o in organization [redacted] on tokens per min (TPM): Limit 30000, Used 29760, Requested 1542."}},
		{"openai project", "primary", openAIProjectRateLimitBody, "proj_Q8rTn2VxW5yZ0aB3cD6eF9gH",
			[]string{"Rate limit reached for gpt-4o in project [redacted] on requests per min (RPM)"}},
		{"anthropic organization", "backup", anthropicRateLimitBody, "ba4ee1f1-7b46-4de8-a6cd-6e7c9ca1e2a4",
			[]string{"This request would exceed the rate limit for your organization ([redacted]) of 50,000 input tokens per minute."}},
		{"anthropic org", "backup", anthropicOrgRateLimitBody, "80162711-722b-4454-ae75-c6334e6796f2",
			[]string{"This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: [redacted], model: claude-sonnet-4-5)."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			oa, an := limited(tt.body), []reply(nil)
			if tt.model == "backup" {
				oa, an = nil, limited(tt.body)
			}
			g := newGateway(t, `{use: "tracing"}`, oa, an)
			for _, stream := range []bool{false, true} {
				code, _, resp := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody(tt.model, "hi", stream))
				assert.Equal(t, http.StatusTooManyRequests, code, resp)
				code, _, resp2 := do(t, "POST", g.url+"/v1/messages", clientKey, messagesBody(tt.model, "hi", stream), "anthropic-version", "2023-06-01")
				assert.Equal(t, http.StatusTooManyRequests, code, resp2)
				code, _, resp3 := do(t, "POST", g.url+"/v1/responses", clientKey, []byte(fmt.Sprintf(`{"model": %q, "input": "hi", "stream": %v}`, tt.model, stream)))
				assert.Equal(t, http.StatusTooManyRequests, code, resp3)
				for _, r := range []string{resp, resp2, resp3} {
					assert.NotContains(t, r, tt.secret)
					for _, k := range tt.kept {
						assert.Contains(t, r, k)
					}
				}
			}
			// The gateway's own log keeps the whole message, for its operator.
			assert.Contains(t, g.logs.String(), tt.secret)
		})
	}
	// Through the SDK: the message an OpenAI client reads.
	g := newGateway(t, `{use: "tracing"}`, limited(openAIRateLimitBody), nil)
	_, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, http.StatusTooManyRequests, oe.StatusCode)
	assert.Contains(t, oe.Message, "in organization [redacted] on tokens per min")
	assert.NotContains(t, oe.RawJSON(), "org-AbC123")
}

func TestWithoutAccount(t *testing.T) {
	for in, want := range map[string]string{
		"no ids here": "no ids here",
		"the org-chart, organization of the team":                                           "the org-chart, organization of the team",
		"org-Y7BYGmWRXNPOjZ7MbShyK4Cg and proj_Q8rTn2VxW5yZ0aB3cD6eF9gH in wrkspc_01AbCdEf": "[redacted] and [redacted] in [redacted]",
		"org-members, org-wide, org-administrators, proj_settings, proj_abcdef123":          "org-members, org-wide, org-administrators, proj_settings, proj_abcdef123",
		"Organisation: 0f0f0f0f-1111-2222-3333-444455556666.":                               "Organisation: [redacted].",
		"request 0f0f0f0f-1111-2222-3333-444455556666 failed":                               "request 0f0f0f0f-1111-2222-3333-444455556666 failed",
		"RATE LIMIT FOR YOUR ORGANIZATION (0F0F0F0F-1111-2222-3333-444455556666)":           "RATE LIMIT FOR YOUR ORGANIZATION ([redacted])",
		"per minute (org: 0f0f0f0f-1111-2222-3333-444455556666, model: m)":                  "per minute (org: [redacted], model: m)",
		"(ORG:0f0f0f0f-1111-2222-3333-444455556666)":                                        "(ORG:[redacted])",
		"the org 0f0f0f0f-1111-2222-3333-444455556666 is":                                   "the org [redacted] is",
	} {
		assert.Equal(t, want, withoutAccount(in), in)
	}
}
