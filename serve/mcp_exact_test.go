package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smugglingUpstream is an MCP server over HTTP whose answer to a tools/call
// is an event stream written at once: the events given, each holding a
// response to the call (its id put in place of ID).
func smugglingUpstream(t *testing.T, events ...string) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "unused"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				Method string          `json:"method"`
				ID     json.RawMessage `json:"id"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == "tools/call" {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
				var out bytes.Buffer
				for _, e := range events {
					out.WriteString(strings.ReplaceAll(e, "ID", string(req.ID)))
				}
				_, _ = w.Write(out.Bytes())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestMCPResultIsTheOneTheClientReads: the structured content and _meta of
// an upstream's result are read again from the JSON text of its response
// (exactResult). That reading kept the last response to the call in what
// had been read of the stream, whatever the event's name, while the MCP
// client reads the first event named "message" (or unnamed): an upstream
// that wrote a small result followed by another response to the call, or
// an event of another name before it, had the other's structured content
// served in place of the one checked against -maxresult, so a result of
// any size (up to the client's 16 MiB event bound) reached the client. The
// response read is the one the client reads, and the limit holds for the
// result served.
func TestMCPResultIsTheOneTheClientReads(t *testing.T) {
	big := strings.Repeat("x", 4<<10)
	small := `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"ok":true}}}`
	large := `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"big":"` + big + `"}}}`
	for name, events := range map[string][]string{
		"second response":       {"event: message\ndata: " + small + "\n\n", "event: message\ndata: " + large + "\n\n"},
		"event of another name": {"event: other\ndata: " + large + "\n\n", "event: message\ndata: " + small + "\n\n"},
	} {
		t.Run(name, func(t *testing.T) {
			up := smugglingUpstream(t, events...)
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: {url: %q}\n", up))),
				WatchInterval: -1, MaxToolResultBytes: 1 << 10})
			cs := connectProxy(t, s.url, "", nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup"})
			require.NoError(t, err)
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			assert.False(t, strings.Contains(string(raw), big[:64]), "the result served is the one read and bounded: %.200s", raw)
			assert.False(t, res.IsError, "%.200s", raw)
			assert.Equal(t, map[string]any{"ok": true}, res.StructuredContent, "%.200s", raw)
		})
	}
}

// TestMCPResultBoundCountsMetaAndNumbers: -maxresult counted a result's
// contents and the strings of its structured content, but not its _meta,
// and a number as 8 bytes whatever its digits (read as written, a number
// is its text), nor a content's _meta, annotations and media type: an
// upstream could send megabytes in any of them past the bound. All count,
// and such a result is refused as one over the limit.
func TestMCPResultBoundCountsMetaAndNumbers(t *testing.T) {
	big := strings.Repeat("7", 4<<10)
	for name, result := range map[string]string{
		"meta":          `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1},"_meta":{"note":"` + big + `"}}`,
		"number":        `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"n":0.` + big + `}}`,
		"meta number":   `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1},"_meta":{"n":0.` + big + `}}`,
		"content meta":  `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png","_meta":{"note":"` + big + `"}}]}`,
		"annotations":   `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png","annotations":{"lastModified":"` + big + `"}}]}`,
		"media type":    `{"content":[{"type":"image","data":"aGk=","mimeType":"image/` + big + `"}]}`,
		"resource meta": `{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"ok","_meta":{"note":"` + big + `"}}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			up := smugglingUpstream(t, "event: message\ndata: "+`{"jsonrpc":"2.0","id":ID,"result":`+result+"}\n\n")
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: {url: %q}\n", up))),
				WatchInterval: -1, MaxToolResultBytes: 1 << 10})
			cs := connectProxy(t, s.url, "", nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup"})
			require.NoError(t, err)
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			assert.True(t, res.IsError, "%.200s", raw)
			assert.Contains(t, text(t, res), "over the limit of 1024 bytes", "%.200s", raw)
			assert.False(t, strings.Contains(string(raw), big[:64]), "%.200s", raw)
		})
	}
}
