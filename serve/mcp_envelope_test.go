package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPEnvelopeReadStrictly: /mcp refuses, with a JSON-RPC invalid
// request before anything runs, the bodies the chat routes refuse: two
// messages back to back (the second would go unanswered), a key of the
// envelope or of params given twice or spelt in another case (a proxy or
// a log before the gateway may read the other), and an id that is a
// number but no integer a float64 holds exactly (the answer would carry
// another id: 7.9 answered as 7).
func TestMCPEnvelopeReadStrictly(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream)))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"Mcp-Session-Id", cs.ID(), "Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion}
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	refund := `{"name":"refund","arguments":{"order_id":"A1","amount":5}}`
	for body, want := range map[string]string{
		call("60", refund) + call("61", refund): "after the first JSON-RPC message",
		call("60", refund) + " x":               "after the first JSON-RPC message",
		call("62", `{"name":"delete_all","name":"refund","arguments":{"order_id":"A1","amount":5}}`):                        "params.name: given twice",
		call("63", `{"name":"refund","Name":"delete_all","arguments":{"order_id":"A1","amount":5}}`):                        "params.Name: given twice",
		call("64", `{"name":"refund","arguments":{"order_id":"A1","amount":5},"Arguments":{"order_id":"A1","amount":500}}`): "params.Arguments",
		`{"jsonrpc":"2.0","id":65,"ID":66,"method":"tools/call","params":` + refund + `}`:                                   "ID: given twice",
		`{"jsonrpc":"2.0","id":67,"method":"tools/call","method":"tools/list","params":` + refund + `}`:                     "method: given twice",
		call("69", `{"Name":"refund","arguments":{"order_id":"A1","amount":5}}`):                                            "params.Name: the field is spelt \"name\"",
		call("7.9", refund):                                        "id: 7.9 is a number but not an integer",
		call("-0.5", refund):                                       "id: -0.5",
		call("1.2e29", refund):                                     "id: 1.2e29",
		call("123456789012345678901234567890", refund):             "id: 123456789012345678901234567890",
		call("9007199254740993", refund):                           "id: 9007199254740993",
		`[` + call("68", refund) + `,` + call("7.5", refund) + `]`: "id: 7.5",
	} {
		code, _, resp := do(t, "POST", s.url+"/mcp", "agent-key", []byte(body), h...)
		require.Equal(t, http.StatusBadRequest, code, body+" -> "+resp)
		var rpc struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(resp), &rpc), resp)
		assert.Equal(t, "2.0", rpc.JSONRPC)
		assert.Equal(t, -32600, rpc.Error.Code, resp)
		assert.Contains(t, rpc.Error.Message, want, body)
	}
	assert.Zero(t, refunds.Load(), "no refused message ran a tool")

	// An initialize, before any session, is read so too.
	code, _, resp := do(t, "POST", s.url+"/mcp", "agent-key", []byte(`{"jsonrpc":"2.0","id":0.5,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), h[:4]...)
	require.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, `"id":0.5`)
	assert.Contains(t, resp, "-32600")
	assert.Contains(t, resp, "id: 0.5 is a number but not an integer")

	// Integral ids, 1e3 and 2^53 among them, are served.
	for _, id := range []string{"8", "-3", "1e3", "9007199254740992", `"x-1"`} {
		code, _, resp := do(t, "POST", s.url+"/mcp", "agent-key", []byte(call(id, refund)), h...)
		require.Equal(t, http.StatusOK, code, resp)
		assert.Contains(t, resp, "refunded 5.00 on A1", id)
	}
	assert.EqualValues(t, 5, refunds.Load())
	require.NoError(t, cs.Ping(context.Background(), nil), "the session goes on")
}
