package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPNumbersAreCheckedAndSentAsWritten: tools/call arguments were
// decoded to float64, so the guard denying account 9007199254740993 saw
// 9007199254740992 and let the call through, and the upstream was sent
// the rounded number (9007199254740995 reached it as 9007199254740996): an
// action on an account the client never named. The guard now decides on
// the number written, the upstream receives it, and a number that neither
// float64 nor int64 holds is refused by layer tools, never sent.
func TestMCPNumbersAreCheckedAndSentAsWritten(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "close_account", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			sent = append(sent, string(req.Params.Arguments))
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: bank: url: %q
tools: close_account: args: {type: "object", required: ["account_id"], properties: account_id: type: "integer"}
chains: tool: [{use: "guard", name: "protected", tools: ["close_account"], deny: "args.account_id == 9007199254740993", message: "account 9007199254740993 is protected"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	call := func(args string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "close_account", Arguments: json.RawMessage(args)})
		require.NoError(t, err)
		return res
	}

	res := call(`{"account_id": 9007199254740993}`)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by protected")
	for _, tc := range []struct{ args, field string }{
		{`{"account_id": 1, "rate": 0.1000000000000000055511151231257827}`, "args.rate"},
		{`{"account_id": 1, "rate": 1e400}`, "args.rate"},
		{`{"account_id": 123456789012345678901234567890}`, "args.account_id"},
	} {
		res := call(tc.args)
		require.True(t, res.IsError, tc.args)
		assert.Contains(t, text(t, res), "blocked by tools", tc.args)
		assert.Contains(t, text(t, res), tc.field, tc.args)
	}
	mu.Lock()
	assert.Empty(t, sent, "no refused call reached the upstream")
	mu.Unlock()

	res = call(`{"account_id": 9007199254740995, "rate": 0.1}`)
	require.False(t, res.IsError, text(t, res))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, 1)
	assert.JSONEq(t, `{"account_id": 9007199254740995, "rate": 0.1}`, sent[0])
	assert.Contains(t, sent[0], "9007199254740995", "the upstream receives the number written")
}

// wireRecorder keeps the bodies of the responses a client reads.
type wireRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	read bytes.Buffer
}

func (w *wireRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(r)
	if err == nil {
		resp.Body = &recordedBody{ReadCloser: resp.Body, w: w}
	}
	return resp, err
}

func (w *wireRecorder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.read.String()
}

type recordedBody struct {
	io.ReadCloser
	w *wireRecorder
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.mu.Lock()
	b.w.read.Write(p[:n])
	b.w.mu.Unlock()
	return n, err
}

// exactResultTool returns a result whose structured content and _meta hold
// integers above 2^53 and a decimal, as its JSON text.
func exactResultTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "see structured content"}},
		StructuredContent: json.RawMessage(`{"account_id": 9007199254740993, "balance": 12345678901234567, "rate": 0.1, "ids": [9007199254740995]}`),
		Meta:              mcp.Meta{"ledger_seq": json.RawMessage(`9007199254740997`)}}, nil
}

// TestMCPResultNumbersAreRelayedAsWritten: the MCP client decodes an
// upstream result's structured content and _meta with every number a
// float64, so an account id of 9007199254740993 was checked by an after
// guard (which denied its neighbour 9007199254740992) and relayed to the
// client as 9007199254740992. The upstream's numbers are read as written,
// by the chain and in the result the client gets, over HTTP and stdio.
func TestMCPResultNumbersAreRelayedAsWritten(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "balance", InputSchema: json.RawMessage(`{"type":"object"}`)}, exactResultTool)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	tsJSON := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(tsJSON.Close)
	const guard = `chains: tool: [{use: "guard", name: "neighbour", phase: "after", deny: "has(result.structuredContent) && (result.structuredContent.account_id == 9007199254740992 || result._meta.ledger_seq == 9007199254740996)", message: "a neighbour"}]`
	for name, server := range map[string]string{
		"http":  fmt.Sprintf(`{url: %q}`, ts.URL),
		"json":  fmt.Sprintf(`{url: %q}`, tsJSON.URL),
		"stdio": fmt.Sprintf(`{command: [%q, "-test.run=^TestMCPStdioHelper$"], env: AGENTC_TEST_MCP_STDIO: "1"}`, os.Args[0]),
	} {
		t.Run(name, func(t *testing.T) {
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: bank: %s\n%s\n", server, guard))), WatchInterval: -1})
			rec := &wireRecorder{base: bearer{}}
			client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp",
				HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cs.Close() })
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "balance"})
			require.NoError(t, err)
			require.False(t, res.IsError, text(t, res))
			wire := rec.String()
			for _, n := range []string{`"account_id":9007199254740993`, `"balance":12345678901234567`, `"rate":0.1`,
				`"ids":[9007199254740995]`, `"ledger_seq":9007199254740997`} {
				assert.Contains(t, wire, n, "the client reads the number the upstream wrote")
			}
		})
	}
}
