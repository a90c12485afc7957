package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// bearer adds an Authorization header (and more) to every request.
type bearer struct {
	key    string
	header map[string]string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	for k, v := range b.header {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectProxy connects a go-sdk client to the proxy at url with key.
func connectProxy(t *testing.T, url, key string, header map[string]string) *mcp.ClientSession {
	t.Helper()
	return connectProxyWith(t, url, key, header, nil)
}

// connectProxyWith connects a go-sdk client with opts to the proxy.
func connectProxyWith(t *testing.T, url, key string, header map[string]string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key, header: header}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		require.True(t, ok, "content %T", c)
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n")
}

// inProcessUpstream serves a go-sdk MCP server with two tools on a
// loopback port: refund (counted) and lookup.
func inProcessUpstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var refunds atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	type refundIn struct {
		OrderID    string  `json:"order_id"`
		Amount     float64 `json:"amount"`
		ApprovedBy string  `json:"approved_by,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "refund", Description: "Refund an order."},
		func(_ context.Context, _ *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, any, error) {
			refunds.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %.2f on %s", in.Amount, in.OrderID)}}}, nil, nil
		})
	type lookupIn struct {
		OrderID string `json:"order_id"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look an order up.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			if in.OrderID == "missing" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no order missing"}}}, nil, nil
			}
			return nil, map[string]any{"order_id": in.OrderID, "total": 42.5}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, &refunds
}

const proxyPolicy = `package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: {
	side_effecting: true
	args: {type: "object", required: ["order_id", "amount"], properties: {
		order_id: {type: "string", maxLength: 64}
		amount: {type: "number"}
		approved_by: {type: "string", maxLength: 64}
	}}
}
chains: tool: [
	{use: "tool_policy", deny: ["delete_all"]},
	{use: "guard", name: "refund_limit", tools: ["refund"],
		deny: "args.amount > 100.0 && !has(args.approved_by)", message: "refunds over 100 need an approver"},
	{use: "audit", trail: "logical"},
]
`

func TestMCPProxyInProcessUpstream(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream)))})

	// Without a key the endpoint answers 401.
	code, _, _ := do(t, "POST", s.url+"/mcp", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	assert.Equal(t, 401, code)

	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "order-7"})
	tools, err := UpstreamTools(context.Background(), cs)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"lookup", "refund"}, names)

	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	assert.Equal(t, "refunded 40.00 on A1", text(t, res))
	assert.EqualValues(t, 1, refunds.Load())

	// The guard refuses before the upstream is called.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "B7", "amount": 250}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by refund_limit")
	assert.Equal(t, 1, strings.Count(text(t, res), "blocked by refund_limit"), "the layer is named once: %s", text(t, res))
	assert.Contains(t, text(t, res), "refunds over 100 need an approver")
	assert.EqualValues(t, 1, refunds.Load(), "a blocked call never reaches the upstream")

	// A structured result passes through; an upstream error result is an
	// error result.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, map[string]any{"order_id": "A1", "total": 42.5}, res.StructuredContent)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "missing"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "no order missing")
	// The policy does not declare lookup, but the pay server lists it: it
	// counts as declared, and its arguments are checked against the
	// upstream's input schema before the upstream is called.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": 7}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "args.order_id: expected string, but got number")

	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_blocks_total{layer="tools",stage="tool"} 1`)
	assert.Contains(t, metrics, `agentc_serve_blocks_total{layer="refund_limit",stage="tool"} 1`)
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="ok",tool="refund"} 1`)
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="error",tool="lookup"} 1`)
}

// TestMCPProxyFilesystemServer fronts the real filesystem MCP server from
// npm: file_check refuses a path outside the root before the server sees
// it.
func TestMCPProxyFilesystemServer(t *testing.T) {
	bin := fsBinary(t)
	root := t.TempDir()
	root, err := filepath.EvalSymlinks(root)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hello from the workspace\n"), 0o644))
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret\n"), 0o644))
	policy := fmt.Sprintf(`package gw

mcp: servers: fs: command: [%q, %q]
tools: {
	read_text_file: {path_arg: "path"}
	write_file: {side_effecting: true, path_arg: "path"}
}
chains: tool: [
	{use: "file_check", roots: [%q]},
	{use: "audit", trail: "logical"},
]
`, bin, root, root)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy))})
	cs := connectProxy(t, s.url, "", nil)

	tools, err := UpstreamTools(context.Background(), cs)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	assert.Contains(t, names, "read_text_file")
	assert.Contains(t, names, "list_directory")

	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "notes.txt")}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Contains(t, text(t, res), "hello from the workspace")

	upstreamCalls := func() int64 { return s.srv.cur.Load().mcp.tools["read_text_file"].calls.Load() }
	require.EqualValues(t, 1, upstreamCalls())
	for _, path := range []string{
		filepath.Join(root, "..", filepath.Base(outside), "secret.txt"),
		filepath.Join(outside, "secret.txt"),
		root + "/../../etc/passwd",
	} {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": path}})
		require.NoError(t, err)
		assert.True(t, res.IsError, path)
		assert.Contains(t, text(t, res), "blocked by file_check", path)
		assert.NotContains(t, text(t, res), "top secret")
	}
	assert.EqualValues(t, 1, upstreamCalls(), "file_check refused the traversals before the upstream saw them")
}

// TestMCPProxyServesHostTools: a host tool (Options.Tools) is listed and
// called on /mcp beside the upstream tools, through the tool chain, with
// the policy's description and argument schema.
func TestMCPProxyServesHostTools(t *testing.T) {
	var ran atomic.Int64
	policy := `package gw

tools: transfer: {
	side_effecting: true
	description: "Move money between accounts."
	args: {type: "object", required: ["amount"], properties: amount: type: "number"}
}
chains: tool: [
	{use: "guard", name: "cap", tools: ["transfer"], deny: "args.amount > 100.0", message: "over the cap"},
]
`
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1,
		Tools: map[string]runtime.ToolFunc{"transfer": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			ran.Add(1)
			return fmt.Sprintf("moved %v", c.Args["amount"]), nil
		}}})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	tools, err := UpstreamTools(ctx, cs)
	require.NoError(t, err)
	require.Len(t, tools, 1)
	assert.Equal(t, "transfer", tools[0].Name)
	assert.Equal(t, "Move money between accounts.", tools[0].Description)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 40}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, "moved 40", text(t, res))
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 400}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by cap")
	assert.EqualValues(t, 1, ran.Load())
}

// outcomeFailingSink writes every intent and refuses every outcome, as an
// audit store that fails between the two.
type outcomeFailingSink struct{}

func (outcomeFailingSink) Append(_ context.Context, r runtime.AuditRecord) error {
	if r.Phase == runtime.PhaseOutcome {
		return errors.New("audit store unavailable")
	}
	return nil
}

// TestMCPOutcomeUnrecordedIsInDoubt: a refund that ran upstream but whose
// audit outcome could not be written is reported to the MCP client as in
// doubt, not as a failure it may send again, and counted as such.
func TestMCPOutcomeUnrecordedIsInDoubt(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{
		Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream))),
		Deps:   runtime.Deps{Audit: outcomeFailingSink{}},
	})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "order-8"})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(text(t, res), "in_doubt by audit: "), text(t, res))
	assert.EqualValues(t, 1, refunds.Load(), "the refund ran")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_tool_calls_total{outcome="in_doubt",tool="refund"} 1`)
}

// An upstream MCP server that requires a bearer token gets it from the
// headers the policy gives, read from the environment: the plan holds the
// variable's name, the server's requests the token.
func TestMCPProxyURLServerHeaders(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	var unauthorized atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer mcp-s3cret" || r.Header.Get("X-Team") != "support" {
			unauthorized.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		u, _ := url.Parse(upstream)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: {
	url: %q
	headers: {Authorization: "Bearer ${PAY_MCP_TOKEN}", "X-Team": "support"}
}
`, sha("agent-key"), front.URL)
	dir := writePolicy(t, policy)

	env := map[string]string{"PAY_MCP_TOKEN": "mcp-s3cret"}
	s := startServer(t, Options{Source: cueSource(dir), LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 5}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.EqualValues(t, 1, refunds.Load())
	assert.Zero(t, unauthorized.Load(), "every request to the upstream carried the headers")

	c, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan)
	assert.Equal(t, map[string]string{"Authorization": "Bearer ${PAY_MCP_TOKEN}", "X-Team": "support"}, c.Plan.MCPServers["pay"].Headers,
		"the plan keeps the reference, not the token")

	// Without the variable the server does not start, and says which
	// variable it needs; no request goes out without its credential.
	_, err = New(context.Background(), Options{Source: cueSource(dir), Logger: slog.New(slog.DiscardHandler),
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `mcp server "pay": header Authorization: environment variable PAY_MCP_TOKEN is not set`)
	assert.Zero(t, unauthorized.Load())

	// A wrong token is the upstream's refusal; the token is not in the error.
	env["PAY_MCP_TOKEN"] = "wrong-token"
	_, err = New(context.Background(), Options{Source: cueSource(dir), Logger: slog.New(slog.DiscardHandler),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-token")
	assert.Positive(t, unauthorized.Load())
}

// TestMCPUpstreamEchoingItsCredentialIsScrubbed: an upstream (or a proxy in
// front of it) that echoes the request's Authorization header in its
// JSON-RPC error, at connection or on a call, does not hand the gateway's
// credential to the MCP client, the log or the load's error.
func TestMCPUpstreamEchoingItsCredentialIsScrubbed(t *testing.T) {
	const token = "mcp-tok-93c1f0a7d2"
	upstream, _ := inProcessUpstream(t)
	var mode atomic.Value // "", "call" or "all": which requests are refused
	mode.Store("")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		m := mode.Load().(string)
		if r.Method == http.MethodPost && (m == "all" || m == "call" && bytes.Contains(body, []byte(`"tools/call"`))) {
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &msg)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"credential [%s] was revoked"}}`, msg.ID, r.Header.Get("Authorization"))
			return
		}
		u, _ := url.Parse(upstream)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	dir := writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pay: {url: %q, headers: Authorization: "Bearer ${PAY_MCP_TOKEN}"}
`, front.URL))
	lookup := func(k string) (string, bool) { return token, k == "PAY_MCP_TOKEN" }
	s := startServer(t, Options{Source: cueSource(dir), LookupEnv: lookup, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	mode.Store("call")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 5}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "was revoked", "the upstream's refusal reaches the client")
	assert.NotContains(t, text(t, res), token)
	assert.NotContains(t, s.logs.String(), token)

	mode.Store("all")
	logs := &rt.LogBuffer{}
	_, err = New(context.Background(), Options{Source: cueSource(dir), Logger: slog.New(slog.NewTextHandler(logs, nil)), LookupEnv: lookup})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was revoked")
	assert.NotContains(t, err.Error(), token)
	assert.NotContains(t, logs.String(), token)
}

// An upstream MCP server the proxy can no longer reach is an error result
// that says so without the transport's text (the upstream's URL and
// address); the gateway's log has the whole error.
func TestMCPUnreachableUpstreamIsNotDescribed(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	front := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), front.URL)))})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{RunHeader: "order-9"})
	front.CloseClientConnections()
	front.Close()

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 5}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	msg := text(t, res)
	assert.Contains(t, msg, `mcp server "pay"`)
	assert.Contains(t, msg, "the cause is in the gateway's log")
	host := strings.TrimPrefix(front.URL, "http://")
	for _, leak := range []string{host, "127.0.0.1", "dial tcp", "http://"} {
		assert.NotContains(t, msg, leak)
	}
	assert.Contains(t, s.logs.String(), host, "the log has the whole error")
	assert.Zero(t, refunds.Load())
}

// TestMCPAccessLogNamesTheRun: the access-log line of a POST /mcp that
// carried a tool call names the call's run, the run its tool chain and
// spans saw.
func TestMCPAccessLogNamesTheRun(t *testing.T) {
	policy := `package gw

tools: ping: {description: "Answers.", args: {type: "object"}}
`
	runs := make(chan string, 1)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1,
		Tools: map[string]runtime.ToolFunc{"ping": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			runs <- runtime.RunOf(ctx).ID
			return "pong", nil
		}}})
	cs := connectProxy(t, s.url, "", map[string]string{RunHeader: "obs-1"})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	run := <-runs
	require.NotEmpty(t, run)
	want := fmt.Sprintf("run=%s ", run)
	require.Eventually(t, func() bool {
		for line := range strings.Lines(s.logs.String()) {
			if strings.Contains(line, "msg=request ") && strings.Contains(line, "path=/mcp ") && strings.Contains(line, want) {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "an access-log line of /mcp naming %s:\n%s", run, s.logs.String())
}
