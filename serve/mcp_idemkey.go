package serve

import (
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/runtime"
)

// IdempotencyKeyMeta is the _meta key under which a tools/call sent to an
// upstream MCP server carries the call's idempotency key: the same for
// every execution of one logical call (a retry, a duplicate that takes an
// in-doubt claim over on another replica), so that the server can tell a
// repeat from a new call and not repeat its effect.
const IdempotencyKeyMeta = "dev.agentc/idempotency-key"

// withIdempotencyKey gives params, the upstream call of c, c's idempotency
// key in its _meta, unless c's tool is declared read-only (a repeat of it
// has no effect to tell apart).
func withIdempotencyKey(params *mcp.CallToolParams, c *runtime.ToolCall) {
	if c.Tool != nil && !c.Tool.SideEffecting {
		return
	}
	meta := maps.Clone(params.GetMeta())
	if meta == nil {
		meta = map[string]any{}
	}
	meta[IdempotencyKeyMeta] = c.IdempotencyKey()
	params.SetMeta(meta)
}
