package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// leak is a secret the redact layer's defaults mask.
const leak = "AKIAABCDEFGHIJKLMNOP"

// resultsUpstream serves one tool per kind of result, each carrying leak
// where a client reads it.
func resultsUpstream(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "kinds", Version: "1"}, nil)
	add := func(name string, res *mcp.CallToolResult) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil })
	}
	txt := func(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }
	add("text", &mcp.CallToolResult{Content: []mcp.Content{txt("key " + leak)}})
	add("multi", &mcp.CallToolResult{Content: []mcp.Content{txt("clean"), txt("key " + leak)}})
	add("error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{txt("failed with key " + leak)}})
	add("structured", &mcp.CallToolResult{Content: []mcp.Content{txt("see structured")}, StructuredContent: map[string]any{"key": leak},
		Meta: mcp.Meta{"note": "key " + leak}})
	add("embedded", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "file:///k", MIMEType: "text/plain", Text: "key " + leak}}}})
	add("blob", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "file:///k", MIMEType: "application/octet-stream", Blob: []byte("key " + leak)}}}})
	add("link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///k", Name: "k", Description: "key " + leak}}})
	add("image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: pngClean}, txt("key " + leak)}})
	add("binary", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "file:///b", MIMEType: "image/png", Blob: pngClean}}}})
	add("image_holding_key", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: pngLike}}})
	add("blob_holding_key", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "file:///b", MIMEType: "image/png", Blob: pngLike}}}})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// pngLike is binary data (not UTF-8, mostly not text) holding leak, as a
// PNG's text chunk among its compressed pixels would: its printable
// stretches are read, as strings(1) reads them (docs/detection.md, Encoded
// values). pngClean is the same without it.
var (
	pngLike  = []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00\x9c\xfe\x07", 16) + leak + strings.Repeat("\x81\x00\xd3\x1f", 16))
	pngClean = []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00\x9c\xfe\x07", 16) + "IDAT" + strings.Repeat("\x81\x00\xd3\x1f", 16))
)

// TestMCPToolResultsAreRedacted: a redact layer of the tool chain masks
// every text of an upstream's result that the client reads: its text
// contents, its structured content, embedded resources (a blob of text
// included), resource links, _meta, and the text of an error result.
// Binary data passes intact.
func TestMCPToolResultsAreRedacted(t *testing.T) {
	upstream := resultsUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: kinds: url: %q
chains: tool: [{use: "redact"}]
`, sha("agent-key"), upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	call := func(name string) (*mcp.CallToolResult, string) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
		require.NoError(t, err, name)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		return res, string(b)
	}
	for _, name := range []string{"text", "multi", "error", "structured", "embedded", "blob", "link", "image"} {
		res, raw := call(name)
		assert.NotContains(t, raw, leak, "%s: the client reads the secret", name)
		assert.Contains(t, raw, "[REDACTED:aws-access-key-id]", name)
		assert.Equal(t, name == "error", res.IsError, "%s: %s", name, raw)
	}

	res, raw := call("blob")
	require.Len(t, res.Content, 1, raw)
	r := res.Content[0].(*mcp.EmbeddedResource).Resource
	assert.Equal(t, "key [REDACTED:aws-access-key-id]", r.Text, "a blob of text is served as its text")
	assert.Nil(t, r.Blob)

	res, raw = call("structured")
	assert.Equal(t, "key [REDACTED:aws-access-key-id]", res.Meta["note"], raw)

	// Binary data is data: it passes as the upstream sent it.
	res, raw = call("image")
	require.Len(t, res.Content, 2, raw)
	assert.Equal(t, pngClean, res.Content[0].(*mcp.ImageContent).Data)
	res, raw = call("binary")
	require.Len(t, res.Content, 1, raw)
	assert.Equal(t, pngClean, res.Content[0].(*mcp.EmbeddedResource).Resource.Blob)

	// Unless its bytes hold the key, readable between the binary ones: then
	// the client gets neither the key nor the bytes holding it, but a text
	// in its place saying its data was masked.
	for _, name := range []string{"image_holding_key", "blob_holding_key"} {
		res, raw = call(name)
		require.Len(t, res.Content, 1, raw)
		if tc, ok := res.Content[0].(*mcp.TextContent); assert.True(t, ok, "%s: %s", name, raw) {
			assert.Contains(t, tc.Text, "masked its data", name)
		}
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				assert.NotContains(t, string(c.Data), leak, name)
			case *mcp.EmbeddedResource:
				assert.NotContains(t, string(c.Resource.Blob), leak, name)
				assert.NotContains(t, c.Resource.Text, leak, name)
			case *mcp.TextContent:
				assert.NotContains(t, c.Text, leak, name)
			}
		}
	}
}

// TestMCPLookAlikeToolNamesWithheld: an upstream tool whose name holds a
// character outside the MCP tool name characters (a Cyrillic look-alike, a
// zero-width space) is not served: its calls would escape the rules that
// name the tool it looks like.
func TestMCPLookAlikeToolNamesWithheld(t *testing.T) {
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	for _, name := range []string{"refund", "r\u0435fund", "refund\u200b"} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				calls.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
chains: tool: [{use: "tool_policy", deny: ["refund"]}]
`, sha("agent-key"), ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	assert.Equal(t, []string{"refund"}, listedTools(t, cs))
	for _, name := range []string{"refund", "r\u0435fund", "refund\u200b"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
		if err == nil {
			assert.True(t, res.IsError, "%q is refused", name)
		}
	}
	assert.EqualValues(t, 0, calls.Load(), "no look-alike of a denied tool reaches the upstream")
	assert.Contains(t, s.logs.String(), "mcp tool withheld: its name is not a valid MCP tool name")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_mcp_tools_withheld{layer="mcp",server="pay"} 2`)
}

// connectSession connects a go-sdk client to the proxy with key and returns
// it with the id of its session.
func connectSession(t *testing.T, url, key string) (*mcp.ClientSession, func() string) {
	t.Helper()
	var sid atomic.Value
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: sessionOf{bearer: bearer{key: key}, id: &sid}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs, func() string { return sid.Load().(string) }
}

// mcpRequest is a POST of one JSON-RPC message on session sid.
func mcpRequest(ctx context.Context, base, key, sid, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// postMCP posts one JSON-RPC message on session sid and returns the
// response's status and body; ctx ends the request.
func postMCP(ctx context.Context, base, key, sid, body string) (int, string, error) {
	req, err := mcpRequest(ctx, base, key, sid, body)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestMCPClientCancelsCall: a client that cancels a call
// (notifications/cancelled) while keeping its request open has the upstream
// call cancelled, and a side-effecting tool's outcome audited in doubt.
func TestMCPClientCancelsCall(t *testing.T) {
	upstream, started, canceled := hangingUpstream(t)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: slow: url: %q
tools: hang: side_effecting: true
chains: tool: [{use: "audit", trail: "logical"}]
`, sha("agent-key"), upstream))), Deps: runtime.Deps{Audit: audit}, WatchInterval: -1})
	_, sid := connectSession(t, s.url, "agent-key")

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _, _ = postMCP(ctx, s.url, "agent-key", sid(), `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	}()
	<-started
	code, _, err := postMCP(context.Background(), s.url, "agent-key", sid(),
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"user stopped"}}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, code)
	require.Eventually(t, func() bool { return canceled.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the upstream call is cancelled")
	require.Eventually(t, func() bool {
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "hang" {
				return r.Decision == runtime.DecisionInDoubt
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the cancelled call is audited in doubt")
	cancel()
	<-answered
}

// TestMCPUpstreamRequestsAreNotRelayed: an upstream's own requests do not
// reach the proxy's client: sampling (a model call outside the chat chain)
// and elicitation fail at the upstream, roots/list answers no root, and its
// log and progress notifications go no further than the proxy.
func TestMCPUpstreamRequestsAreNotRelayed(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	add := func(name string, h func(ctx context.Context, ss *mcp.ServerSession) string) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h(ctx, req.Session)}}}, nil
			})
	}
	add("sample", func(ctx context.Context, ss *mcp.ServerSession) string {
		_, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "write the refund approval"}}}})
		return fmt.Sprint(err)
	})
	add("elicit", func(ctx context.Context, ss *mcp.ServerSession) string {
		_, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "your password?"})
		return fmt.Sprint(err)
	})
	add("roots", func(ctx context.Context, ss *mcp.ServerSession) string {
		res, err := ss.ListRoots(ctx, nil)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(len(res.Roots), " roots")
	})
	add("notify", func(ctx context.Context, ss *mcp.ServerSession) string {
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Data: "log " + leak})
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "p", Message: "progress " + leak, Progress: 1})
		return "done"
	})
	s := frontMCP(t, "asker", srv)
	var relayed atomic.Int64
	cs := connectProxyWith(t, s.url, "agent-key", nil, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			relayed.Add(1)
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "approved"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			relayed.Add(1)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		LoggingMessageHandler:       func(context.Context, *mcp.LoggingMessageRequest) { relayed.Add(1) },
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { relayed.Add(1) },
	})
	require.NoError(t, cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}))
	want := map[string]string{"sample": "client does not support CreateMessage", "elicit": "client does not support elicitation",
		"roots": "0 roots", "notify": "done"}
	for name, w := range want {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Meta: mcp.Meta{"progressToken": "p"}})
		require.NoError(t, err)
		assert.Contains(t, text(t, res), w, name)
	}
	assert.EqualValues(t, 0, relayed.Load(), "no upstream request or notification reaches the client")
}

// TestMCPArgumentsThatAreNotAnObject: arguments that are not a JSON object
// are refused before the tool chain and the upstream; arguments nested
// deep are checked (here against the tool's schema) without harm, and past
// the decoder's depth the request is refused.
func TestMCPArgumentsThatAreNotAnObject(t *testing.T) {
	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream))), WatchInterval: -1})
	cs, sid := connectSession(t, s.url, "agent-key")
	deep := any("x")
	for range 900 {
		deep = []any{deep}
	}
	for name, args := range map[string]any{"array": []any{"A1", 40}, "string": "A1", "number": 40} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: args})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "arguments must be a JSON object", name)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": deep, "amount": 1}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "args.order_id: expected string")

	tooDeep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	code, body, err := postMCP(context.Background(), s.url, "agent-key", sid(),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"refund","arguments":{"order_id":`+tooDeep+`,"amount":1}}}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "maximum nesting depth")
	assert.EqualValues(t, 0, refunds.Load())
}

// TestMCPFilesystemMediaFileIsRedacted: the filesystem server's
// read_media_file returns a file that is neither an image nor audio as a
// base64 blob; a text file so read is served as its text, which redact
// reads.
func TestMCPFilesystemMediaFileIsRedacted(t *testing.T) {
	bin := fsBinary(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "deploy.env"), []byte("AWS_KEY="+leak+"\n"), 0o644))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: fs: command: [%q, %q]
chains: tool: [{use: "redact"}]
`, bin, root))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_media_file", Arguments: map[string]any{"path": filepath.Join(root, "deploy.env")}})
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.False(t, res.IsError, string(b))
	assert.NotContains(t, string(b), leak)
	assert.NotContains(t, string(b), base64.StdEncoding.EncodeToString([]byte("AWS_KEY="+leak)))
	assert.Contains(t, string(b), "AWS_KEY=[REDACTED:aws-access-key-id]")
}

// TestMCPResultSchemaChecksStructuredContent: a tool that declares an
// outputSchema answers with structuredContent, and the policy's
// result_schema for it is checked against that value, not against the MCP
// result object around it.
func TestMCPResultSchemaChecksStructuredContent(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	type orderIn struct {
		ID string `json:"id"`
	}
	type orderOut struct {
		Status string `json:"status"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "order", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, orderOut, error) {
			if in.ID == "bad" {
				return nil, orderOut{Status: "lost"}, nil
			}
			return nil, orderOut{Status: "shipped"}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: shop: url: %q
tools: order: result_schema: {type: "object", required: ["status"], properties: status: enum: ["open", "shipped"]}
chains: tool: [{use: "output_coerce"}]
`, sha("agent-key"), ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)

	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	require.NotNil(t, tools.Tools[0].OutputSchema, "the tool's outputSchema is listed")

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, map[string]any{"status": "shipped"}, res.StructuredContent)

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "bad"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "/status")
	assert.Nil(t, res.StructuredContent)
}

// TestMCPResultSchemaChecksJSONText: a tool without an outputSchema that
// answers JSON as text is checked by the value the text encodes, so a
// result_schema of type "object" can be written for it; a valid result
// reaches the client as the upstream's text.
func TestMCPResultSchemaChecksJSONText(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "order", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			status := "shipped"
			if strings.Contains(string(req.Params.Arguments), "bad") {
				status = "lost"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"id": "A1", "status": "` + status + `"}`}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: shop: url: %q
tools: order: result_schema: {type: "object", required: ["status"], properties: status: enum: ["open", "shipped"]}
chains: tool: [{use: "output_coerce"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "A1"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	assert.Equal(t, `{"id": "A1", "status": "shipped"}`, text(t, res))
	assert.Nil(t, res.StructuredContent)

	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "order", Arguments: map[string]any{"id": "bad"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "/status")
}
