package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestAStoreThatRefusesForGoodIsNoOutage: a layer's store that refuses
// the gateway's statement as it will every time (its tables dropped, a
// privilege revoked, the credentials changed) was answered as an outage:
// 503 store_unavailable with Retry-After: 1, so every client retried at
// once, and again, a call that cannot pass until someone mends the
// store. It is the gateway's own failure: 500 store_refused, without
// Retry-After and with x-should-retry: false (which the OpenAI and
// Anthropic SDKs honour), and on /mcp a message saying the store refused
// and will again.
func TestAStoreThatRefusesForGoodIsNoOutage(t *testing.T) {
	raw := storetest.ServerURL(t, storetest.PostgresEnv)
	prefix := storetest.Prefix(t)
	t.Cleanup(func() { dropSchema(t, raw, prefix) })
	upstream, refunds := inProcessUpstream(t)
	decls := fmt.Sprintf(`stores: pg: {kind: "postgres", url: %q, prefix: %q, timeout: "2s"}
mcp: servers: pay: url: %q
chains: tool: [{use: "rate_limit", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "pg"}]`, raw, prefix, upstream)
	g := newGatewayWith(t, decls, `{use: "rate_limit", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "pg"}`, nil, nil)

	s, err := postgres.Open(context.Background(), raw, prefix)
	require.NoError(t, err)
	_, err = s.Pool().Exec(context.Background(), "DROP SCHEMA "+prefix+" CASCADE")
	s.Close()
	require.NoError(t, err)

	code, h, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	assert.Equal(t, 500, code, body)
	assert.Empty(t, h.Get("Retry-After"))
	assert.Equal(t, "false", h.Get("x-should-retry"))
	typ, ecode, layer, msg := openAIError(t, body)
	assert.Equal(t, "server_error", typ)
	assert.Equal(t, "store_refused", ecode)
	assert.Equal(t, "rate_limit", layer)
	assert.Contains(t, msg, storeRefusedWithheld, body)
	assert.NotContains(t, msg, prefix, "the store's text stays in the log")
	var oe struct{ Error struct{ Kind string } }
	require.NoError(t, json.Unmarshal([]byte(body), &oe), body)
	assert.Equal(t, "store_refused", oe.Error.Kind)

	code, h, body = do(t, "POST", g.url+"/v1/messages", "", messagesBody("backup", "hi", false), "x-api-key", clientKey)
	assert.Equal(t, 500, code, body)
	assert.Empty(t, h.Get("Retry-After"))
	assert.Equal(t, "false", h.Get("x-should-retry"))
	var ae struct {
		Error struct{ Type, Kind, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ae), body)
	assert.Equal(t, "api_error", ae.Error.Type)
	assert.Equal(t, "store_refused", ae.Error.Kind)
	assert.Contains(t, ae.Error.Message, storeRefusedWithheld)

	res, err := connectProxy(t, g.url, clientKey, nil).CallTool(context.Background(),
		&mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), storeRefusedWithheld)
	assert.False(t, strings.Contains(text(t, res), "store unavailable "+transportWithheld), text(t, res))
	assert.Zero(t, refunds.Load())
}
