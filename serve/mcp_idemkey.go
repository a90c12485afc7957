package serve

import (
	"crypto/sha256"
	"encoding/hex"
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
	meta[IdempotencyKeyMeta] = upstreamKey(c)
	params.SetMeta(meta)
}

// upstreamKey is the key c's server is sent: c's idempotency key, but for
// a key a tenant's caller supplied, a digest of the tenant and it, so that
// two tenants choosing one key (an order number) never present the server
// one key, whose first outcome it would answer the other with. A derived
// key is a digest with the tenant in it already.
func upstreamKey(c *runtime.ToolCall) string {
	key := c.IdempotencyKey()
	if !c.Meta.IdempotencyKeySupplied() || c.Meta.Run.Tenant == "" {
		return key
	}
	d := sha256.Sum256([]byte("dev.agentc/tenant-key\x00" + c.Meta.Run.Tenant + "\x00" + key))
	return hex.EncodeToString(d[:])
}
