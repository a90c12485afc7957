package serve

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPResultMembersAreReadExactly: the MCP client reads a result's
// members by their exact names, while the proxy's second reading of the
// structured content and _meta (exactResult) matched them in any case, the
// last winning: an upstream that wrote structuredContent and then
// StructuredContent (or _META) had the proxy serve, and its layers check,
// a member the client library ignores in place of the one it reads.
func TestMCPResultMembersAreReadExactly(t *testing.T) {
	up := smugglingUpstream(t, "event: message\ndata: "+`{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}],`+
		`"structuredContent":{"ok":true},"StructuredContent":{"ok":false},"_meta":{"src":"up"},"_META":{"src":"other"}}}`+"\n\n")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: {url: %q}\n", up))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup"})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, map[string]any{"ok": true}, res.StructuredContent)
	assert.Equal(t, "up", res.Meta["src"])
}
