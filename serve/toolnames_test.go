package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrefixedUpstreamToolNamedUnprefixedFailsTheLoad: with a prefix, the
// tool chain sees an upstream tool as prefix+name; a rule that names the
// tool by the upstream's own name would not apply to it, so the load fails
// naming the rule and the name to write.
func TestPrefixedUpstreamToolNamedUnprefixedFailsTheLoad(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	head := `package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: {url: "%s", prefix: "pay_"}
`
	for _, tc := range []struct{ name, policy, want string }{
		{"declaration", `tools: refund: side_effecting: true`, `tools.refund names tool "refund", which mcp server "pay" serves as "pay_refund"`},
		{"tool_policy deny", `chains: tool: [{use: "tool_policy", deny: ["refund"]}]`, `chains.tool[0] "tool_policy" deny names tool "refund"`},
		{"tool_policy allow", `chains: tool: [{use: "tool_policy", allow: ["lookup"]}]`, `allow names tool "lookup", which mcp server "pay" serves as "pay_lookup"`},
		{"guard predicate", `chains: tool: [{use: "guard", name: "no_refunds", deny: "tool.name == 'refund'"}]`, `chains.tool[0] "no_refunds" deny names tool "refund"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := cueSource(writePolicy(t, fmt.Sprintf(head, sha("agent-key"), upstream)+tc.policy))
			srv, err := New(context.Background(), Options{Source: src, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				LookupEnv: func(string) (string, bool) { return "", false }})
			if err == nil {
				_ = srv.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `write "pay_`)
		})
	}

	// Named as the chain sees them, the rules apply.
	policy := fmt.Sprintf(head, sha("agent-key"), upstream) + `
tools: pay_refund: {side_effecting: true, args: {type: "object", required: ["order_id", "amount"],
	properties: {order_id: type: "string", amount: type: "number"}}}
chains: tool: [
	{use: "tool_policy", deny: ["pay_lookup"]},
	{use: "guard", name: "cap", tools: ["pay_refund"], deny: "args.amount > 100.0"},
]`
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay_refund", Arguments: map[string]any{"order_id": "A1", "amount": 500}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by cap")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay_lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by tool_policy")
	assert.Zero(t, refunds.Load())
}
