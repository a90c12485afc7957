package serve

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// A tenant sending another's Idempotency-Key and run id, the same call,
// is not answered with the other's recorded result: the record is the
// tenant's own, and its refund runs.
func TestTenantsNeverShareAnIdempotencyRecord(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: {
	a: {sha256: "%s", tenant: "bank-a"}
	b: {sha256: "%s", tenant: "bank-b"}
}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent"}]
`, sha("a-key"), sha("b-key"), upstream))), WatchInterval: -1})
	header := map[string]string{"Idempotency-Key": "refund-A1", RunHeader: "order-7"}
	for _, key := range []string{"a-key", "b-key", "a-key"} {
		cs := connectProxy(t, s.url, key, header)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
	}
	assert.EqualValues(t, 2, refunds.Load(), "one refund per tenant: the second tenant's ran, the first tenant's repeat was deduplicated")
}

// A tenant exhausting its rate limit and budget of scope key, under its
// own run ids or the other's, leaves the other's whole.
func TestTenantsNeverExhaustTheOthersLimits(t *testing.T) {
	for _, chain := range []string{
		`{use: "rate_limit", rate: 2, per: "1h", burst: 2, mode: "reject", scope: "key"}`,
		`{use: "meter", scope: "key", budget: calls: 2}`,
	} {
		t.Run(chain, func(t *testing.T) {
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants+"chains: chat: [%s]\n", sha("alice-key"), sha("bob-key"), chain))),
				WatchInterval: -1,
				Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
					release := make(chan struct{})
					close(release)
					return map[string]runtime.ModelClient{"primary": heldModel(make(chan struct{}, 100), release)}, nil
				}})
			call := func(key, run string) int {
				code, _, _ := do(t, "POST", s.url+"/v1/chat/completions", key, chatBody("primary", "hi", false), RunHeader, run)
				return code
			}
			for _, run := range []string{"r1", "bank-b/r1", "BANK-B/R1"} {
				call("alice-key", run)
			}
			assert.NotEqual(t, http.StatusOK, call("alice-key", "r2"), "alice's limit is spent")
			assert.Equal(t, http.StatusOK, call("bob-key", "r1"))
			assert.Equal(t, http.StatusOK, call("bob-key", "r1"))
		})
	}
}
