package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentc-dev/agentc/runtime"
)

// A tool's error quoting a provider's key (a file named after it) reaches
// the client with the key redacted, and neither the gateway's log lines
// (its own "mcp tool call failed", a log layer's with include_errors) nor a
// span recording the error in clear hold it: they keep the key's hash.
func TestCredentialsAreScrubbedFromLogLinesAndSpans(t *testing.T) {
	const key = "sk-proj-UPSTREAMSECRETKEY1234567890abcd"
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	type readIn struct {
		Path string `json:"path"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read a file.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "ENOENT: no such file " + in.Path}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	dir := writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: fs: url: %q
chains: tool: [
	{use: "tracing", include_errors: true},
	{use: "log", include_errors: true},
]
`, up.URL))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, Deps: runtime.Deps{TracerProvider: tp}})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "/data/" + key}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "/data/[redacted]")
	assert.NotContains(t, text(t, res), key)

	sum := sha256.Sum256([]byte(key))
	mark := "[redacted sha256 " + hex.EncodeToString(sum[:])[:16] + "]"
	logs := s.logs.String()
	assert.Contains(t, logs, "mcp tool call failed")
	assert.NotContains(t, logs, key)
	assert.Contains(t, logs, "/data/"+mark, "the log keeps the key's hash")
	ended := rec.Ended()
	require.Len(t, ended, 1)
	assert.NotContains(t, ended[0].Status().Description, key)
	assert.Contains(t, ended[0].Status().Description, "/data/"+mark)
	for _, ev := range ended[0].Events() {
		for _, kv := range ev.Attributes {
			assert.NotContains(t, kv.Value.Emit(), key, string(kv.Key))
		}
	}
}
