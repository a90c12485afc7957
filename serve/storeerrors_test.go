package serve

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestStoreFailuresAreCounted: a call a layer's store failed is counted in
// agentc_serve_store_errors_total by stage, layer and store, on the chat
// routes (where it is otherwise only a 503 among the requests) and on
// /mcp (where it is otherwise an error outcome like a tool's own failure).
func TestStoreFailuresAreCounted(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	prefix := storetest.Prefix(t)
	upstream, refunds := inProcessUpstream(t)
	decls := fmt.Sprintf(`stores: shared: {kind: "redis", url: %q, prefix: %q, timeout: "1s"}
mcp: servers: pay: url: %q
chains: tool: [{use: "rate_limit", name: "calls", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "shared"}]`, proxy.URL, prefix, upstream)
	g := newGatewayWith(t, decls, `{use: "rate_limit", name: "turns", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "shared"}`, nil, nil)
	assert.NotContains(t, g.metrics(t), "agentc_serve_store_errors_total{")

	proxy.Cut()
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	require.Equal(t, 503, code, body)
	cs := connectProxy(t, g.url, clientKey, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.NoError(t, cs.Close())
	assert.Zero(t, refunds.Load())

	metrics := g.metrics(t)
	assert.Contains(t, metrics, `agentc_serve_store_errors_total{layer="turns",stage="chat",store="shared"} 1`)
	assert.Contains(t, metrics, `agentc_serve_store_errors_total{layer="calls",stage="tool",store="shared"} 1`)
}
