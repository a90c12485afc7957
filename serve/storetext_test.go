package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestAStoreFailureTellsNoClientWhereTheStoreIs: with the PostgreSQL
// server gone (its port refusing connections, or a server that closes
// each connection during its handshake), a call the rate limit refuses
// told every tenant the database's user, name and address
// ("failed to connect to `user=postgres database=...`: 127.0.0.1:...") or
// the driver's "unexpected EOF", in both chat APIs' error bodies and in
// MCP error results: only the transport's own error was withheld. A store's
// text never reaches the client: the message names the layer and says the
// store is unavailable, and the log keeps the cause.
func TestAStoreFailureTellsNoClientWhereTheStoreIs(t *testing.T) {
	raw := storetest.ServerURL(t, storetest.PostgresEnv)
	proxy := storetest.NewProxy(t, raw)
	prefix := storetest.Prefix(t)
	t.Cleanup(func() { dropSchema(t, raw, prefix) })
	upstream, refunds := inProcessUpstream(t)
	decls := fmt.Sprintf(`stores: pg: {kind: "postgres", url: %q, prefix: %q, timeout: "2s"}
mcp: servers: pay: url: %q
chains: tool: [{use: "rate_limit", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "pg"}]`, proxy.URL, prefix, upstream)
	g := newGatewayWith(t, decls, `{use: "rate_limit", rate: 1000, per: "1m", mode: "reject", scope: "key", store: "pg"}`, nil, nil)
	pu, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	dbu, err := url.Parse(raw)
	require.NoError(t, err)
	secret := []string{pu.Host, dbu.Host, "user=", "database=", "postgres", "EOF", "dial", "refused", "failed to"}
	if db := strings.TrimPrefix(dbu.Path, "/"); len(db) > 3 {
		secret = append(secret, db)
	}

	check := func(t *testing.T, what, msg string) {
		t.Helper()
		assert.Contains(t, msg, "rate_limit", "%s names the layer", what)
		assert.Contains(t, msg, "rate limit store unavailable; the call did not run: "+transportWithheld, what)
		for _, s := range secret {
			assert.NotContains(t, msg, s, what)
		}
	}
	calls := func(t *testing.T) {
		code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
		assert.Equal(t, 503, code, body)
		_, _, layer, msg := openAIError(t, body)
		check(t, "chat completions", layer+": "+msg)

		code, _, body = do(t, "POST", g.url+"/v1/messages", "", messagesBody("backup", "hi", false), "x-api-key", clientKey)
		assert.Equal(t, 503, code, body)
		var e struct{ Error struct{ Message string } }
		require.NoError(t, json.Unmarshal([]byte(body), &e), body)
		check(t, "messages", e.Error.Message)

		res, err := connectProxy(t, g.url, clientKey, nil).CallTool(context.Background(),
			&mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		check(t, "mcp", text(t, res))
	}

	t.Run("port refuses", func(t *testing.T) {
		proxy.Cut()
		calls(t)
	})
	t.Run("server closes during the handshake", func(t *testing.T) {
		ln, err := net.Listen("tcp", pu.Host)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// Read the start of the startup message, then hang up.
				_, _ = io.ReadFull(c, make([]byte, 8))
				_ = c.Close()
			}
		}()
		calls(t)
	})
	assert.Zero(t, refunds.Load())
	assert.Contains(t, g.logs.String(), "user=", "the log keeps the cause")
}

// TestClientMessageWithholdsAStoreText: the text of a store's error a
// layer passes on is withheld wherever it sits in the error, whether the
// call did not run (runtime.StoreUnavailable) or ran and its outcome was
// not recorded (runtime.StoreFailed).
func TestClientMessageWithholdsAStoreText(t *testing.T) {
	cause := errors.New("postgres audit append: failed to connect to `user=postgres database=prod`: 10.0.0.7:5432 (db.internal): failed to receive message: unexpected EOF")
	for name, err := range map[string]error{
		"did not run": &runtime.CallError{Layer: "trail", Message: "audit intent not written; the call did not run", Err: runtime.StoreUnavailable(cause)},
		"ran": &runtime.CallError{Kind: runtime.KindPermanent, Layer: "trail", Message: "audit outcome not written",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, runtime.StoreFailed(cause))},
		"cancelled": &runtime.CallError{Layer: "trail", Message: "audit intent not written; the call did not run",
			Err: runtime.StoreUnavailable(fmt.Errorf("%w: %w", cause, context.Canceled))},
	} {
		t.Run(name, func(t *testing.T) {
			msg := clientMessage(err)
			assert.Contains(t, msg, "trail: audit")
			assert.Equal(t, 1, strings.Count(msg, "store unavailable"), msg)
			assert.Contains(t, msg, transportWithheld)
			for _, s := range []string{"postgres", "user=", "prod", "10.0.0.7", "db.internal", "EOF"} {
				assert.NotContains(t, msg, s)
			}
		})
	}
}
