package serve

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const replayPolicy = `package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent"}]
`

// TestAReplayedToolCallIsNotCountedAsRun: a duplicate the idempotent
// layer answered with the stored result was counted as outcome "ok", as a
// call the upstream ran: three calls of one key read 3 "ok" for one
// refund. It is counted as "replayed".
func TestAReplayedToolCallIsNotCountedAsRun(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(replayPolicy, sha("agent-key"), upstream)))})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "order-7", "Idempotency-Key": "refund-A1"})
	for range 3 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
		assert.Equal(t, "refunded 40.00 on A1", text(t, res))
	}
	assert.EqualValues(t, 1, refunds.Load(), "the upstream ran the refund once")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil) // counted before the result is sent
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="ok",tool="refund"} 1`)
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="replayed",tool="refund"} 2`)
}
