package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// checkpointedPolicy checkpoints each turn and each tool result
// (after_tool) in the sqlite store "runs", behind a guard named guard.
func checkpointedPolicy(upstream, guard string) string {
	return fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
stores: runs: {kind: "sqlite", path: "runs.db"}
chains: {
	tool: [{use: "guard", name: "%s", deny: "size(tool.name) > 200"}]
	turn: [{use: "checkpoint", store: "runs", after_tool: true}]
}
`, sha("agent-key"), upstream, guard)
}

// refund calls refund on order through cs and returns the result.
func refund(t *testing.T, cs *mcp.ClientSession, order string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": order, "amount": 1}})
	require.NoError(t, err)
	return res
}

// TestTheGatewayRunsNoTurnChainOnToolCalls: the gateway runs no turn, and
// says so at load, yet a checkpoint with after_tool saved the run of each
// /mcp call. A new generation (a reload) and another replica knew nothing
// of the version saved, so every later call of the run, which ran, came
// back "blocked by checkpoint ... another process saved version N": the
// run could not go on. The turn chain's layers act on no call of the
// gateway: the calls go on, and nothing is saved.
func TestTheGatewayRunsNoTurnChainOnToolCalls(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	dir := writePolicy(t, checkpointedPolicy(upstream, "g0"))
	a := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	b := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	assert.Contains(t, a.logs.String(), "turn chain not run by the gateway")
	header := map[string]string{RunHeader: "case-1"}

	cs := connectProxy(t, a.url, "agent-key", header)
	res := refund(t, cs, "A1")
	require.False(t, res.IsError, text(t, res))

	// A reload, on the session that stays open.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(checkpointedPolicy(upstream, "g1")), 0o644))
	require.NoError(t, a.srv.Reload(context.Background()))
	res = refund(t, cs, "A2")
	assert.False(t, res.IsError, "after a reload: %s", text(t, res))

	// The run's next call on another replica.
	res = refund(t, connectProxy(t, b.url, "agent-key", header), "A3")
	assert.False(t, res.IsError, "on another replica: %s", text(t, res))
	assert.EqualValues(t, 3, refunds.Load())

	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "runs.db"))
	require.NoError(t, err)
	defer store.Close()
	vs, err := store.CheckpointVersions(context.Background(), "shop/case-1")
	require.NoError(t, err)
	assert.Empty(t, vs, "the gateway saved the run")
	assert.False(t, strings.Contains(a.logs.String()+b.logs.String(), "blocked by checkpoint"))
}
