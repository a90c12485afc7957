package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	add("image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: pngLike}, txt("key " + leak)}})
	add("binary", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "file:///b", MIMEType: "image/png", Blob: pngLike}}}})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// pngLike is binary data (not UTF-8) holding leak.
var pngLike = []byte("\x89PNG\r\n\x1a\n" + leak)

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
	assert.Equal(t, pngLike, res.Content[0].(*mcp.ImageContent).Data)
	res, raw = call("binary")
	require.Len(t, res.Content, 1, raw)
	assert.Equal(t, pngLike, res.Content[0].(*mcp.EmbeddedResource).Resource.Blob)
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

// TestMCPFilesystemMediaFileIsRedacted: the filesystem server's
// read_media_file returns a file that is neither an image nor audio as a
// base64 blob; a text file so read is served as its text, which redact
// reads.
func TestMCPFilesystemMediaFileIsRedacted(t *testing.T) {
	bin := os.Getenv("AGENTC_MCP_FILESYSTEM")
	if bin == "" {
		t.Skip("set AGENTC_MCP_FILESYSTEM to the mcp-server-filesystem binary (.ci/run installs it: npm ci --prefix .ci/node) to run this test")
	}
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
