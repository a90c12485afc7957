package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawEcho serves a go-sdk MCP server whose tool transfer answers the
// arguments it received, as their JSON text.
func rawEcho(t *testing.T) string {
	t.Helper()
	url, _ := countingRawEcho(t)
	return url
}

// countingRawEcho is rawEcho, with the count of the calls it served.
func countingRawEcho(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "transfer", Description: "Move money.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, &calls
}

// TestMCPCallKeepsItsNumbers: the upstream runs the call on the numbers
// the client sent, digit for digit: an account number past 2^53 or an
// amount with more digits than a float64 holds is not rounded on the way.
func TestMCPCallKeepsItsNumbers(t *testing.T) {
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "bank"}
mcp: servers: bank: url: "%s"
tools: transfer: {side_effecting: true, args: {type: "object", properties: {account: {type: "integer"}, amount: {type: "number"}}}}
chains: tool: [
	{use: "guard", name: "limit", deny: "args.amount > 1000.0", message: "over the limit"},
]
`, sha("agent-key"), rawEcho(t))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer",
		Arguments: json.RawMessage(`{"account": 12345678901234567891, "amount": 999.99000000000000001}`)})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Contains(t, text(t, res), `12345678901234567891`)
	assert.Contains(t, text(t, res), `999.99000000000000001`)
}

// TestMCPGuardReadsExactNumbers: the chain reads the numbers kept exact as
// numbers: a guard's bound and the args schema still refuse.
func TestMCPGuardReadsExactNumbers(t *testing.T) {
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "bank"}
mcp: servers: bank: url: "%s"
tools: transfer: {side_effecting: true, args: {type: "object", properties: {account: {type: "integer"}, amount: {type: "number", minimum: 0}}}}
chains: tool: [
	{use: "guard", name: "limit", deny: "args.amount > 1000.0", message: "over the limit"},
]
`, sha("agent-key"), rawEcho(t))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	for args, want := range map[string]string{
		`{"account": 1, "amount": 1000.00000000000000001}`:   "",
		`{"account": 1, "amount": 1000.5}`:                   "blocked by limit",
		`{"account": 1.5, "amount": 1}`:                      "args.account",
		`{"account": 1, "amount": -0.000000000000000000001}`: "args.amount",
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		if want == "" {
			assert.False(t, res.IsError, "%s: %s", args, text(t, res))
			continue
		}
		assert.True(t, res.IsError, args)
		assert.Contains(t, text(t, res), want, args)
	}
}

// TestMCPNumbersTheChecksCannotHoldExactly: a number out of a float64's
// range is refused, as before; one written with an exponent or longer
// than maxExactNumber is read as a float64, so the args schema's bounds
// never work on the exact value of 1e-999999999 (a billion digits) or a
// megabyte of digits. None of them takes the server down.
func TestMCPNumbersTheChecksCannotHoldExactly(t *testing.T) {
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "bank"}
mcp: servers: bank: url: "%s"
tools: transfer: {side_effecting: true, args: {type: "object", properties: {account: {type: "integer"}, amount: {type: "number", minimum: 0}, list: {type: "array", items: {type: "number", maximum: 5}}}}}
`, sha("agent-key"), rawEcho(t))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	cs := connectProxy(t, s.url, "agent-key", nil)
	long := "0." + strings.Repeat("0", 100_000) + "1"
	for args, want := range map[string]string{
		`{"amount": 1e999999999}`:                        "out of the range of a float64",
		`{"list": [1, [2, {"x": -1e999999999}]]}`:        "out of the range of a float64",
		`{"amount": 1e-999999999}`:                       "",
		`{"list": [1e-999999999, 4.999999999e0]}`:        "",
		`{"amount": ` + long + `}`:                       "",
		`{"amount": -1` + strings.Repeat("0", 300) + `}`: "args.amount",
		`{"list": [` + long + `, 5.0000000000001]}`:      "args.list",
	} {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: json.RawMessage(args)})
		assert.Less(t, time.Since(start), 5*time.Second)
		name := args[:min(len(args), 60)]
		if strings.Contains(want, "range") {
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), want, name)
			continue
		}
		require.NoError(t, err, name)
		if want == "" {
			assert.False(t, res.IsError, "%s: %s", name, text(t, res))
			continue
		}
		assert.True(t, res.IsError, name)
		assert.Contains(t, text(t, res), want, name)
	}
	// The server still serves.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: json.RawMessage(`{"account": 12345678901234567891}`)})
	require.NoError(t, err)
	assert.Contains(t, text(t, res), "12345678901234567891")
}

// TestMCPOneNumberTwoSpellingsIsOneCall: a number a float64 holds reaches
// the chain as a float64, as it did, and one it does not in its shortest
// decimal form, so two spellings of one number are one call to an
// idempotent layer's derived key: the second is a duplicate, and the tool
// runs once.
func TestMCPOneNumberTwoSpellingsIsOneCall(t *testing.T) {
	upstream, calls := countingRawEcho(t)
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "bank"}
mcp: servers: bank: url: "%s"
tools: transfer: {side_effecting: true, args: {type: "object"}}
chains: tool: [{use: "idempotent"}]
`, sha("agent-key"), upstream)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	for i, spellings := range [][2]string{
		{`{"to": 1, "amount": 40}`, `{"to": 1.0, "amount": 4e1}`},
		{`{"to": 9007199254740993, "amount": 0.1}`, `{"to": 9007199254740993.000, "amount": 0.10}`},
		{`{"to": 2, "amount": 999.99000000000000001}`, `{"to": 2, "amount": 999.990000000000000010}`},
	} {
		cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: fmt.Sprintf("run-%d", i)})
		first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: json.RawMessage(spellings[0])})
		require.NoError(t, err)
		require.False(t, first.IsError, text(t, first))
		again, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: json.RawMessage(spellings[1])})
		require.NoError(t, err)
		assert.Equal(t, text(t, first), text(t, again), spellings[1])
		assert.EqualValues(t, i+1, calls.Load(), "%s after %s ran the tool again", spellings[1], spellings[0])
	}
	assert.EqualValues(t, 3, calls.Load())
}
