package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	logmw "github.com/agentc-dev/agentc/builtins/log"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// countUpstream is a loopback Anthropic API that answers the token
// counting endpoint as the API does, and records what it received.
type countUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func newCountUpstream(t *testing.T, status int, answer string) *countUpstream {
	u := &countUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs, u.body = append(u.reqs, r.Clone(context.Background())), append(u.body, b)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CountTokens")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *countUpstream) received() ([]*http.Request, [][]byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reqs, u.body
}

// countGateway serves gatewayPolicy with chain: primary (OpenAI-shaped) at
// a loopback upstream that must not be called, backup (Claude) at an.
func countGateway(t *testing.T, chain string, an *countUpstream) *gateway {
	t.Helper()
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	t.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	g := &gateway{oa: newUpstream(t), an: newUpstream(t)}
	g.dir = writePolicy(t, fmt.Sprintf(gatewayPolicy, g.oa.URL, an.URL, sha(clientKey), weatherDecl, chain))
	g.served = startServer(t, Options{Source: cueSource(g.dir), WatchInterval: -1})
	return g
}

// anthropicWrongKey is an Anthropic client with a key the policy does not
// declare (the SDK sends no request without a key).
func anthropicWrongKey(g *gateway) *anthropic.Client {
	c := anthropic.NewClient(anthropicoption.WithBaseURL(g.url+"/"), anthropicoption.WithAPIKey("not-a-key"), anthropicoption.WithMaxRetries(0))
	return &c
}

// apiError returns the status and the body of an SDK's error.
func apiError(t *testing.T, err error) (int, map[string]any) {
	t.Helper()
	var raw string
	var status int
	var ae *anthropic.Error
	var oe *openai.Error
	switch {
	case errors.As(err, &ae):
		status, raw = ae.StatusCode, ae.RawJSON()
	case errors.As(err, &oe):
		// The OpenAI SDK keeps the body's error member.
		status, raw = oe.StatusCode, `{"error":`+oe.RawJSON()+`}`
	default:
		t.Fatalf("want an SDK error, got %T: %v", err, err)
	}
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &body), raw)
	return status, body
}

var countParams = anthropic.MessageCountTokensParams{
	Model:    "backup",
	System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are a weather bot.")},
	Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
	Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"location": map[string]any{"type": "string"}}}}}},
}

func TestModelsGetWithBothSDKs(t *testing.T) {
	g := countGateway(t, `{use: "tracing"}`, newCountUpstream(t, 200, `{}`))
	ctx := context.Background()

	om, err := g.openai(t).Models.Get(ctx, "primary")
	require.NoError(t, err)
	assert.Equal(t, "primary", om.ID)
	assert.Equal(t, "model", string(om.Object))
	assert.NotZero(t, om.Created)

	am, err := g.anthropic(t).Models.Get(ctx, "backup", anthropic.ModelGetParams{})
	require.NoError(t, err)
	assert.Equal(t, "backup", am.ID)
	assert.Equal(t, "model", string(am.Type))
	assert.Equal(t, "backup", am.DisplayName)
	assert.False(t, am.CreatedAt.IsZero())

	am, err = g.anthropic(t).Models.Get(ctx, "claude-sonnet-4-5", anthropic.ModelGetParams{})
	require.NoError(t, err)
	assert.Equal(t, "backup", am.ID, "a provider model id names the policy's model")

	_, err = g.openai(t).Models.Get(ctx, "gpt-5")
	status, body := apiError(t, err)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found_error", body["error"].(map[string]any)["type"])
	assert.Equal(t, "unknown_model", body["error"].(map[string]any)["code"])
	assert.NotContains(t, body, "type", "OpenAI's error shape")

	_, err = g.anthropic(t).Models.Get(ctx, "claude-opus-4", anthropic.ModelGetParams{})
	status, body = apiError(t, err)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "error", body["type"], "Anthropic's error shape")
	assert.Equal(t, "not_found_error", body["error"].(map[string]any)["type"])
	assert.Contains(t, body["error"].(map[string]any)["message"], `"claude-opus-4" is not declared`)

	_, err = anthropicWrongKey(g).Models.Get(ctx, "backup", anthropic.ModelGetParams{})
	status, body = apiError(t, err)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "authentication_error", body["error"].(map[string]any)["type"])
	assert.Equal(t, "error", body["type"], "a 401 is in the client's shape too")
	code, _, raw := do(t, "GET", g.url+"/v1/models/backup", "", nil, "anthropic-version", "2023-06-01")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, raw, `"type":"authentication_error"`)
	assert.Contains(t, raw, `"message":"missing API key`)

	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_requests_total{code="200",model="backup",route="model"} 2`)
	assert.Contains(t, m, `agentc_serve_requests_total{code="404",model="-",route="model"} 2`)
}

func TestModelsListWithTheAnthropicSDK(t *testing.T) {
	g := countGateway(t, `{use: "tracing"}`, newCountUpstream(t, 200, `{}`))
	page, err := g.anthropic(t).Models.List(context.Background(), anthropic.ModelListParams{})
	require.NoError(t, err)
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		assert.Equal(t, "model", string(m.Type))
		assert.Equal(t, m.ID, m.DisplayName)
		assert.False(t, m.CreatedAt.IsZero())
	}
	assert.Equal(t, []string{"backup", "primary"}, ids)
	assert.False(t, page.HasMore)
	assert.Equal(t, "backup", page.FirstID)
	assert.Equal(t, "primary", page.LastID)

	// The auto-pager stops after the one page.
	var all []string
	it := g.anthropic(t).Models.ListAutoPaging(context.Background(), anthropic.ModelListParams{})
	for it.Next() {
		all = append(all, it.Current().ID)
	}
	require.NoError(t, it.Err())
	assert.Equal(t, ids, all)

	// The anthropic-version header decides, whatever the key header: a
	// client without it gets OpenAI's list.
	code, _, raw := do(t, "GET", g.url+"/v1/models", clientKey, nil, "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"has_more":false`)
	code, _, raw = do(t, "GET", g.url+"/v1/models", "", nil, "x-api-key", clientKey)
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"object":"list"`)
}

func TestCountTokensThroughTheProvider(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}, {use: "meter", budget: usd: 1}, {use: "retry", max_attempts: 2}`, an)
	var raw *http.Response
	res, err := g.anthropic(t).Messages.CountTokens(context.Background(), countParams,
		anthropicoption.WithHeader("anthropic-beta", "token-efficient-tools-2025-02-19"), anthropicoption.WithResponseInto(&raw))
	require.NoError(t, err)
	assert.EqualValues(t, 412, res.InputTokens)
	assert.Equal(t, "provider", raw.Header.Get("X-Agentc-Token-Count"))
	assert.Equal(t, "req_011CountTokens", raw.Header.Get("request-id"))

	reqs, bodies := an.received()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages/count_tokens", reqs[0].URL.Path)
	assert.Equal(t, "Bearer "+anthropicKey, reqs[0].Header.Get("Authorization"), "the upstream gets the gateway's key")
	assert.Equal(t, "token-efficient-tools-2025-02-19", reqs[0].Header.Get("anthropic-beta"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal(bodies[0], &sent))
	assert.Equal(t, "claude-sonnet-4-5", sent["model"], "the provider's model id")
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "You are a weather bot."}}, sent["system"])
	assert.Equal(t, []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "What is the weather in Paris?"}}}}, sent["messages"])
	require.Len(t, sent["tools"], 1)
	assert.Equal(t, "get_weather", sent["tools"].([]any)[0].(map[string]any)["name"])
	for _, k := range []string{"stream", "max_tokens"} {
		assert.NotContains(t, sent, k)
	}
	assert.Zero(t, g.oa.requests())

	m := g.metrics(t)
	assert.Contains(t, m, `agentc_serve_requests_total{code="200",model="backup",route="count_tokens"} 1`)
	assert.NotContains(t, m, `agentc_serve_spend_usd_total`, "a count is not charged")
	assert.Contains(t, g.logs.String(), "route=count_tokens")
	g.noLeak(t, string(bodies[0]))
}

func TestCountTokensEstimatesWithoutSendingTheConversation(t *testing.T) {
	for name, chain := range map[string]string{
		"security":   `{use: "tracing"}, {use: "security"}`,
		"pii block":  `{use: "pii", action: "block"}`,
		"guard":      `{use: "guard", name: "no_passwords", deny: "messages.exists(m, m.content.contains('password'))", message: "no"}`,
		"redact":     `{use: "redact", patterns: ["secret-[0-9]+"]}`,
		"no chain":   ``,
		"openai/std": `{use: "tracing"}`,
	} {
		t.Run(name, func(t *testing.T) {
			an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
			g := countGateway(t, chain, an)
			params := countParams
			if name == "openai/std" {
				params.Model = "primary" // an OpenAI-shaped model: its provider has no count endpoint
			}
			if name == "no chain" {
				params.Model = "primary"
			}
			var raw *http.Response
			res, err := g.anthropic(t).Messages.CountTokens(context.Background(), params, anthropicoption.WithResponseInto(&raw))
			require.NoError(t, err)
			assert.Equal(t, "estimate", raw.Header.Get("X-Agentc-Token-Count"))
			assert.Positive(t, res.InputTokens)
			reqs, _ := an.received()
			assert.Empty(t, reqs, "nothing is sent to the provider")
			assert.Zero(t, g.oa.requests())
		})
	}
}

func TestCountTokensRefusals(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}`, an)
	ctx := context.Background()
	msgs := `"messages": [{"role": "user", "content": "hi"}]`

	_, err := anthropicWrongKey(g).Messages.CountTokens(ctx, countParams)
	status, body := apiError(t, err)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "authentication_error", body["error"].(map[string]any)["type"])
	code, _, resp := do(t, "POST", g.url+"/v1/messages/count_tokens", "", []byte(`{"model": "backup", `+msgs+`}`), "anthropic-version", "2023-06-01")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, resp, `"message":"missing API key`)

	params := countParams
	params.Model = "claude-opus-4"
	_, err = g.anthropic(t).Messages.CountTokens(ctx, params)
	status, body = apiError(t, err)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found_error", body["error"].(map[string]any)["type"])

	code, _, resp = do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey, []byte(`{"model": "backup", "mcp_servers": [{"type": "url", "url": "https://mcp.example.com", "name": "x"}], `+msgs+`}`))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "mcp_servers")

	code, _, resp = do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey,
		[]byte(`{"model": "backup", `+msgs+`, "tools": [{"name": "wire_money", "input_schema": {"type": "object"}}]}`))
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, resp, "wire_money")

	code, _, resp = do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey, []byte(`{"model": "backup", "messages": [`))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.True(t, strings.Contains(resp, `"type":"error"`), resp)

	reqs, _ := an.received()
	assert.Empty(t, reqs, "no refused request reaches the provider")
}

func TestCountTokensUpstreamFailure(t *testing.T) {
	an := newCountUpstream(t, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`)
	g := countGateway(t, `{use: "tracing"}`, an)
	_, err := g.anthropic(t).Messages.CountTokens(context.Background(), countParams)
	status, body := apiError(t, err)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body["error"].(map[string]any)["message"], "prompt is too long")
	g.noLeak(t, fmt.Sprint(body))
}

// TestCountTokensCarriesThinking: the thinking parameter, which the
// counting endpoint takes (with it, earlier turns' thinking blocks are not
// counted), reaches the provider's count as sent, rather than the count of
// a request without it.
func TestCountTokensCarriesThinking(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}`, an)
	params := countParams
	params.Thinking = anthropic.ThinkingConfigParamOfEnabled(2048)
	_, err := g.anthropic(t).Messages.CountTokens(context.Background(), params)
	require.NoError(t, err)
	_, bodies := an.received()
	require.Len(t, bodies, 1)
	var sent map[string]any
	require.NoError(t, json.Unmarshal(bodies[0], &sent))
	assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(2048)}, sent["thinking"])
}

// TestCountTokensTakesTheKeysRateLimit: a count the provider answers is an
// upstream request on the gateway's key, so it takes a token of the chat
// chain's rate limit per key, from the same bucket as the key's chat
// calls: past the limit it is a 429 with Retry-After, and the provider is
// not asked.
func TestCountTokensTakesTheKeysRateLimit(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}, {use: "rate_limit", rate: 1, per: "1h", burst: 2, mode: "reject", scope: "key"}`, an)
	ctx := context.Background()
	for range 2 {
		_, err := g.anthropic(t).Messages.CountTokens(ctx, countParams)
		require.NoError(t, err)
	}
	var raw *http.Response
	_, err := g.anthropic(t).Messages.CountTokens(ctx, countParams, anthropicoption.WithResponseInto(&raw))
	status, body := apiError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "rate_limit_error", body["error"].(map[string]any)["type"])
	assert.Equal(t, "rate_limit", body["error"].(map[string]any)["layer"])
	reqs, _ := an.received()
	assert.Len(t, reqs, 2, "the provider is not asked past the limit")

	// The chat calls of the key share the bucket the counts emptied.
	code, header, resp := do(t, "POST", g.url+"/v1/messages", clientKey,
		[]byte(`{"model": "backup", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
	assert.Equal(t, http.StatusTooManyRequests, code, resp)
	assert.NotEmpty(t, header.Get("Retry-After"))
	assert.Zero(t, g.an.requests())
}

// quotaLayer is a custom chat middleware that refuses every call, as a
// host's own quota or rate limit would; its traits say nothing of guarding.
type quotaLayer struct{}

func (quotaLayer) WrapChat(runtime.ChatHandler) runtime.ChatHandler {
	return func(context.Context, *runtime.ChatCall, func(runtime.Delta) bool) error {
		return runtime.NotRun(&runtime.CallError{Kind: runtime.KindRateLimited, Layer: "quota", Message: "host quota exhausted"})
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "serve_test_quota", Stages: []plan.Stage{plan.StageChat},
		Traits: []runtime.Trait{runtime.TraitShortCircuits}, Doc: "test layer refusing every chat call",
		New: func() runtime.Middleware { return &quotaLayer{} }})
	// A host may register a builtin's middleware type under an id of its
	// own, with traits of its choosing: it is the host's middleware.
	runtime.Register(runtime.Module{ID: "serve_test_hostlog", Stages: []plan.Stage{plan.StageChat},
		Doc: "test layer built on the log builtin's type", New: func() runtime.Middleware { return &logmw.Log{Level: "info"} }})
}

// countGatewayWith is countGateway with a tracing layer and then layer in
// the chat chain: a layer of a custom middleware, which a policy source
// cannot name.
func countGatewayWith(t *testing.T, an *countUpstream, layer plan.Layer) *gateway {
	t.Helper()
	g := countGateway(t, `{use: "tracing"}`, an)
	src := cueSource(g.dir)
	g.served = startServer(t, Options{WatchInterval: -1, Source: SourceFunc(func(ctx context.Context) (*Loaded, error) {
		ld, err := src.Load(ctx)
		if err == nil {
			ld.Plan.Chains.Chat = append(ld.Plan.Chains.Chat, layer)
		}
		return ld, err
	})})
	return g
}

// assertEstimated asserts that g answers countParams with an estimate,
// sending nothing to an.
func assertEstimated(t *testing.T, g *gateway, an *countUpstream) {
	t.Helper()
	var raw *http.Response
	res, err := g.anthropic(t).Messages.CountTokens(context.Background(), countParams, anthropicoption.WithResponseInto(&raw))
	require.NoError(t, err)
	assert.Equal(t, "estimate", raw.Header.Get("X-Agentc-Token-Count"))
	assert.Positive(t, res.InputTokens)
	reqs, _ := an.received()
	assert.Empty(t, reqs, "nothing is sent to the provider")
}

// TestCountTokensEstimatesBehindACustomMiddleware: the provider counted a
// request behind a custom middleware whose traits did not say it guards,
// though such a layer may refuse every chat call (a host's own quota or
// rate limit, which the count does not pass): the count went upstream on
// the gateway's key regardless. A custom middleware in the chat chain now
// makes the answer an estimate, as the documentation says.
func TestCountTokensEstimatesBehindACustomMiddleware(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGatewayWith(t, an, plan.Layer{Use: "serve_test_quota", Name: "quota"})
	code, _, resp := do(t, "POST", g.url+"/v1/messages", clientKey,
		[]byte(`{"model": "backup", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}`), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusTooManyRequests, code, "the layer refuses the chat calls: %s", resp)
	assertEstimated(t, g, an)
}

// TestCountTokensEstimatesBehindAHostsModuleOfABuiltinsType: a module a
// host registered with a builtin's middleware type was taken for the
// builtin, by the package of its type, and its traits (the host's) were
// trusted: the count went to the provider. Only the modules the builtins
// register are known as theirs; behind this one the count is an estimate.
func TestCountTokensEstimatesBehindAHostsModuleOfABuiltinsType(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	assertEstimated(t, countGatewayWith(t, an, plan.Layer{Use: "serve_test_hostlog", Name: "hostlog"}), an)
}

// TestEveryBuiltinIsKnownAsOne: the count through the provider trusts the
// builtins by their traits; each registered builtin module is marked as
// one, and no module of the host's (a builtin taken for a custom
// middleware would only turn counts into estimates, never the reverse).
func TestEveryBuiltinIsKnownAsOne(t *testing.T) {
	n := 0
	for _, m := range runtime.Modules() {
		if strings.HasPrefix(m.ID, "serve_test_") {
			assert.False(t, m.Builtin, m.ID)
			continue
		}
		assert.True(t, m.Builtin, m.ID)
		n++
	}
	assert.Greater(t, n, 20)
}
