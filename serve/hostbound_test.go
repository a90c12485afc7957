package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestHostClientCutAtThePolicysBound: a model whose client the host
// supplies, and which knows no output bound of its own, with max_tokens in
// the policy. The gateway's wrapper reported the policy's bound as the
// one its client sent, and a request without max_tokens cut at the
// output limit was told "the model's client sent its default, 300",
// though nothing sent it: the host's client got a request without a
// bound. The policy's bound is now sent to it, so the message names the
// bound the model was asked with.
func TestHostClientCutAtThePolicysBound(t *testing.T) {
	const policy = `package gw

models: primary: {max_tokens: 300, usd_per_mtok_in: 1, usd_per_mtok_out: 1}
keys: app: {sha256: "%s", tenant: "acme"}
tools: get_weather: args: {type: "object"}
chains: chat: [{use: "tracing"}]
`
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/policy.cue", []byte(fmt.Sprintf(policy, sha(clientKey))), 0o644))
	var sent atomic.Int64
	sent.Store(-1)
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		sent.Store(int64(req.MaxTokens))
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{ID: "c1", Name: "get_weather", Arguments: `{"location":"Par`}}})
		yield(runtime.Delta{FinishReason: runtime.FinishLength, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 300}})
		return nil
	})
	srv, err := New(context.Background(), Options{Source: cueSource(dir), WatchInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": model}, nil
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })

	code, body := post(srv, "/v1/chat/completions", []byte(`{"model":"primary","messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`))
	assert.Equal(t, 400, code, body)
	assert.Contains(t, body, "raise max_tokens")
	assert.Contains(t, body, "300")
	assert.Equal(t, int64(300), sent.Load(), "the bound the message names is the one the model was asked with")

	code, body = post(srv, "/v1/chat/completions", []byte(`{"model":"primary","max_tokens":50,"messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`))
	assert.Equal(t, 400, code, body)
	assert.Contains(t, body, "the request asks for 50")
	assert.Equal(t, int64(50), sent.Load(), "a request's own bound is sent as it is")
}
