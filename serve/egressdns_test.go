package serve

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// failingResolver fails every lookup as the system resolver does when its
// DNS server does not answer: the error names the server's address.
type failingResolver struct{}

func (failingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "server misbehaving", Name: host, Server: "10.0.0.53:53", IsTemporary: true}
}

// TestAnEgressLookupFailureBehindPIIIsNoUpstreamFailure: egress could not
// look up a URL's host, and pii (kinds ip, action redact) outside it masked
// the DNS server's address in the error's text, so clientMessage did not
// find the lookup's text to withhold and told the client "the upstream
// could not be reached", although no upstream was called. The client
// learns that the egress check failed, on the lookup of the host, without
// the resolver's address.
func TestAnEgressLookupFailureBehindPIIIsNoUpstreamFailure(t *testing.T) {
	for _, action := range []string{"redact", "block"} {
		t.Run(action, func(t *testing.T) {
			tool := rt.NewTool(rt.ToolResult{Value: "written"})
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{
				rt.Layer("pii", `{"action":"`+action+`","kinds":["ip","email"],"on_error":"closed","system":true,"output":true}`),
				rt.Named("net_policy", rt.Layer("egress", `{"allow":["*"]}`)),
			}})
			p.Tools = map[string]plan.Tool{"write_file": {}}
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Resolver: failingResolver{},
				Tools: map[string]runtime.ToolFunc{"write_file": tool.Func()}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = pl.Close() })

			_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "write_file",
				Args: map[string]any{"content": "see https://docs.example.com ok"}})
			require.Error(t, err)
			require.Zero(t, tool.Calls())
			msg := clientMessage(err)
			assert.NotContains(t, msg, "upstream", msg)
			assert.Contains(t, msg, "net_policy: tool write_file: cannot check https://docs.example.com", msg)
			assert.Contains(t, msg, "resolve docs.example.com: "+transportWithheld, msg)
			assert.NotContains(t, msg, "10.0.0.53", msg)
			assert.NotContains(t, msg, "REDACTED", msg)
		})
	}
}
