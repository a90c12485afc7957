package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// estimateOf answers a count_tokens body whose messages and system are
// given with the gateway's estimate (model primary: its provider has no
// count endpoint).
func estimateOf(t *testing.T, g *gateway, system, messages string) int64 {
	t.Helper()
	body := `{"model": "primary", "messages": ` + messages
	if system != "" {
		body += `, "system": ` + system
	}
	body += `}`
	code, h, resp := do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey, []byte(body), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
	require.Equal(t, "estimate", h.Get("X-Agentc-Token-Count"))
	var out struct {
		InputTokens int64 `json:"input_tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp), &out), resp)
	return out.InputTokens
}

// The estimate of count_tokens counts what the model reads of tool
// results and system blocks: a long result's text (a string, a text
// block, several), the user's text beside it, a long system prompt given
// as a string or as blocks, each adds its tokens.
func TestCountTokensEstimateCountsToolResultsAndSystemBlocks(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}`, an)
	long := strings.Repeat("the forecast for the week ahead ", 250) // 8000 bytes
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	call := `{"role": "user", "content": "weather?"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Lyon"}}]}`
	base := estimateOf(t, g, "", `[`+call+`, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]`)
	for name, c := range map[string]struct{ system, result string }{
		"result as a string":      {result: `"content": ` + q(long)},
		"result as a text block":  {result: `"content": [{"type": "text", "text": ` + q(long) + `}]`},
		"result as text blocks":   {result: `"content": [{"type": "text", "text": ` + q(long[:4000]) + `}, {"type": "text", "text": ` + q(long[4000:]) + `}]`},
		"result with user text":   {result: `"content": "ok"}, {"type": "text", "text": ` + q(long)},
		"system as a string":      {system: q(long), result: `"content": "ok"`},
		"system as a block":       {system: `[{"type": "text", "text": ` + q(long) + `}]`, result: `"content": "ok"`},
		"system as cached blocks": {system: `[{"type": "text", "text": ` + q(long[:4000]) + `}, {"type": "text", "text": ` + q(long[4000:]) + `, "cache_control": {"type": "ephemeral"}}]`, result: `"content": "ok"`},
	} {
		n := estimateOf(t, g, c.system, `[`+call+`, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", `+c.result+`}]}]`)
		// The long text's tokens, and at most a separator's more.
		assert.GreaterOrEqual(t, n-base, runtime.EstimateTokens(long)-runtime.EstimateTokens("ok"), "%s: %d more than %d", name, n-base, base)
		assert.LessOrEqual(t, n-base, runtime.EstimateTokens(long)+8, "%s: %d more than %d", name, n-base, base)
	}
}

// A count the provider answers is asked of the system blocks, breakpoint
// included, and of the tool results with the user's text beside them, as
// /v1/messages sends them.
func TestCountTokensSendsToolResultsAndSystemBlocks(t *testing.T) {
	an := newCountUpstream(t, 200, `{"input_tokens": 412}`)
	g := countGateway(t, `{use: "tracing"}`, an)
	body := `{"model": "backup", "system": [{"type": "text", "text": "rules"}, {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}],
		"messages": [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Lyon"}}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}], "is_error": true}, {"type": "text", "text": "and?"}]}]}`
	code, h, resp := do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey, []byte(body), "anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusOK, code, resp)
	assert.Equal(t, "provider", h.Get("X-Agentc-Token-Count"))
	assert.JSONEq(t, `{"input_tokens": 412}`, resp)
	_, bodies := an.received()
	require.Len(t, bodies, 1)
	var got struct {
		System   json.RawMessage
		Messages []struct{ Content json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(bodies[0], &got))
	assert.JSONEq(t, `[{"type": "text", "text": "rules"}, {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}]`, string(got.System))
	require.Len(t, got.Messages, 3)
	assert.JSONEq(t, `[{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}], "is_error": true}, {"type": "text", "text": "and?"}]`, string(got.Messages[2].Content))
}
