package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPArgumentsWithARepeatedKeyAreRefused: arguments that give a key
// twice, or two keys encoding/json folds together (amount and Amount, sql
// and ſql), are refused by layer tools before the tool chain and the
// upstream, as a proposed call's are on the chat routes: the tool chain
// would check the last and the upstream may run the first.
func TestMCPArgumentsWithARepeatedKeyAreRefused(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream)))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	ctx := context.Background()
	for args, key := range map[string]string{
		`{"order_id": "A1", "amount": 500, "amount": 5}`:                          `"/amount"`,
		`{"order_id": "A1", "Amount": 500, "amount": 5}`:                          `"/amount"`,
		`{"order_id": "A1", "amount": 5, "sql": "select 1", "ſql": "drop table"}`: `"/ſql"`,
		`{"order_id": "A1", "amount": 5, "note": {"by": "a", "by": "b"}}`:         `"/note/by"`,
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: json.RawMessage(args)})
		require.NoError(t, err, args)
		require.True(t, res.IsError, args)
		assert.Contains(t, text(t, res), "blocked by tools", args)
		assert.Contains(t, text(t, res), "give the key "+key+" twice", args)
	}
	assert.Zero(t, refunds.Load(), "no refused call reaches the upstream")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_blocks_total{layer="tools",stage="tool"} 4`)

	// Keys given once, whatever their case, run.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: json.RawMessage(`{"order_id": "A1", "amount": 5}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.EqualValues(t, 1, refunds.Load())
}
