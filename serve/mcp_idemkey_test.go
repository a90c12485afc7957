package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedBank is a loopback MCP upstream whose refund records the _meta of
// every call and waits for gate (or its call's cancellation); lookup is
// read-only.
type keyedBank struct {
	url     string
	mu      sync.Mutex
	metas   []map[string]any
	started chan struct{}
	gate    chan struct{}
}

func newKeyedBank(t *testing.T) *keyedBank {
	t.Helper()
	b := &keyedBank{started: make(chan struct{}, 16), gate: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	type in struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	record := func(req *mcp.CallToolRequest) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.metas = append(b.metas, req.Params.GetMeta())
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "refund"},
		func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			record(req)
			b.started <- struct{}{}
			select {
			case <-b.gate:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %.2f on %s", a.Amount, a.OrderID)}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, a struct {
			OrderID string `json:"order_id"`
		}) (*mcp.CallToolResult, any, error) {
			record(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.OrderID}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-b.gate:
		default:
			close(b.gate)
		}
	})
	b.url = ts.URL
	return b
}

// keys returns the idempotency key of every call the bank saw, in order.
func (b *keyedBank) keys() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []any
	for _, m := range b.metas {
		out = append(out, m[IdempotencyKeyMeta])
	}
	return out
}

const keyedRefundPolicy = `
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: {side_effecting: true, retry_safe: true}
tools: lookup: {}
chains: tool: [
	{use: "idempotent", store: "shared", key_args: ["order_id"], lease_ttl: "30s"},
]
`

// TestARetrySafeUpstreamGetsTheCallsIdempotencyKey: a retry_safe refund
// sent to an MCP server carried no idempotency key, so when a duplicate on
// another replica took over the claim a cancelled call left in doubt, the
// bank could not tell the second execution from a new refund, and refunded
// twice. Every call of a tool with effects carries the call's key in its
// _meta, the same on the takeover; a read-only tool's does not.
func TestARetrySafeUpstreamGetsTheCallsIdempotencyKey(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			b := newKeyedBank(t)
			f := startFleet(t, kind, url, 2, fmt.Sprintf(keyedRefundPolicy, sha("agent-key"), b.url))
			a, other := f.replicas[0], f.replicas[1]
			ctx, cancel := context.WithCancel(context.Background())
			first := make(chan error, 1)
			csA := connectProxy(t, a.url, "agent-key", map[string]string{RunHeader: "case-1"})
			go func() {
				_, err := csA.CallTool(ctx, refundA1)
				first <- err
			}()
			<-b.started
			cancel() // the claim ends in doubt: the bank may have refunded
			<-first

			taken := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := connectProxy(t, other.url, "agent-key", map[string]string{RunHeader: "case-2"}).CallTool(context.Background(), refundA1)
				assert.NoError(t, err)
				taken <- res
			}()
			<-b.started
			close(b.gate)
			res := <-taken
			require.False(t, res.IsError, text(t, res))
			assert.Equal(t, "refunded 10.00 on A1", text(t, res))

			res, err := connectProxy(t, other.url, "agent-key", nil).CallTool(context.Background(),
				&mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
			require.NoError(t, err)
			require.False(t, res.IsError, text(t, res))

			keys := b.keys()
			require.Len(t, keys, 3)
			require.IsType(t, "", keys[0], "the first execution carries a key")
			assert.NotEmpty(t, keys[0])
			assert.Equal(t, keys[0], keys[1], "the takeover runs under the first execution's key")
			assert.Nil(t, keys[2], "a read-only call carries none")
		})
	}
}

// TestAnIdempotencyKeyHeaderNamesOneCallUnderKeyArgs: under an idempotent
// layer with key_args, two refunds of different orders sent with one
// Idempotency-Key through two replicas both ran. The second is refused
// (blocked), and the bank sees one refund.
func TestAnIdempotencyKeyHeaderNamesOneCallUnderKeyArgs(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			b := newBank(t, false)
			f := startFleet(t, kind, url, 2, fmt.Sprintf(refundPolicy, sha("agent-key"), b.url, "5s"))
			header := map[string]string{"Idempotency-Key": "IK-2"}
			res, err := connectProxy(t, f.replicas[0].url, "agent-key", header).CallTool(context.Background(),
				&mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "i3", "amount": 1}})
			require.NoError(t, err)
			require.False(t, res.IsError, text(t, res))
			res, err = connectProxy(t, f.replicas[1].url, "agent-key", header).CallTool(context.Background(),
				&mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "i4", "amount": 1}})
			require.NoError(t, err)
			assert.True(t, res.IsError, text(t, res))
			assert.Contains(t, text(t, res), "blocked by idempotent")
			assert.Contains(t, text(t, res), "the idempotency key the caller supplied was used earlier by a call with other values of key_args (order_id)")
			assert.EqualValues(t, 1, b.refunds.Load())
		})
	}
}

// TestTwoTenantsKeysNeverMeetAtTheServer: the key sent in _meta was a
// client's Idempotency-Key as it came: two tenants choosing one key (an
// order number) sent the server one key, and a server that honours it
// answered the second tenant with the first's outcome. A tenant's key
// reaches the server as an opaque digest of the tenant and it: the same
// on every execution of the call, another for another tenant.
func TestTwoTenantsKeysNeverMeetAtTheServer(t *testing.T) {
	b := newKeyedBank(t)
	close(b.gate)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: {
	a: {sha256: %q, tenant: "shop-a"}
	b: {sha256: %q, tenant: "shop-b"}
}
mcp: servers: bank: url: %q
tools: refund: side_effecting: true
`, sha("key-a"), sha("key-b"), b.url))), WatchInterval: -1})
	for _, key := range []string{"key-a", "key-b", "key-a"} {
		cs := connectProxy(t, s.url, key, map[string]string{"Idempotency-Key": "order-7"})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 1}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
	}
	keys := b.keys()
	require.Len(t, keys, 3)
	assert.NotEqual(t, keys[0], keys[1], "two tenants' calls carry two keys")
	assert.Equal(t, keys[0], keys[2], "one tenant's key is the same on every call")
	for _, k := range keys {
		assert.NotContains(t, k, "order-7", "the key is opaque")
	}
}
