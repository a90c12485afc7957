package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clashUpstream serves, on a loopback port, a tool under each of names;
// the server is returned so that a test can change its list.
func clashUpstream(t *testing.T, names ...string) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	for _, name := range names {
		addNamedTool(srv, name)
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return srv, ts.URL
}

func addNamedTool(srv *mcp.Server, name string) {
	srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
}

// threeServersPolicy declares the servers a, b and c, in that order, on
// lines 4, 5 and 6.
const threeServersPolicy = `package gw

mcp: servers: {
	a: url: %q
	b: url: %q
	c: url: %q
}
`

// wantThreeServerClash is the error of the servers of threeServersPolicy
// when all three serve lookup, and a and c serve refund too: each name
// with every server that serves it, in the servers' order.
const wantThreeServerClash = `^policy\.cue:6:\d+: mcp: tool "lookup" is served by "a", "b" and "c" \(declared at policy\.cue:4:\d+, policy\.cue:5:\d+ and policy\.cue:6:\d+\); give all but one of them a prefix
policy\.cue:6:\d+: mcp: tool "refund" is served by both "a" and "c" \(declared at policy\.cue:4:\d+ and policy\.cue:6:\d+\); give one of them a prefix$`

// TestMCPToolNameClashNamesEveryServer: when three servers served one
// name, the load failed naming the first two only (the third was never
// connected), and a name the third shared with the first alone was not
// named. The error names each shared name with every server serving it.
func TestMCPToolNameClashNamesEveryServer(t *testing.T) {
	_, a := clashUpstream(t, "lookup", "refund")
	_, b := clashUpstream(t, "lookup", "stock")
	_, c := clashUpstream(t, "lookup", "refund", "ping")
	err := loadErr(t, fmt.Sprintf(threeServersPolicy, a, b, c))
	assert.Regexp(t, wantThreeServerClash, err.Error())
}

// TestMCPToolNameClashOnReloadNamesEveryServer: a reload to a policy
// whose servers clash fails with the same report, and the previous
// policy stays served.
func TestMCPToolNameClashOnReloadNamesEveryServer(t *testing.T) {
	_, a := clashUpstream(t, "lookup", "refund")
	_, b := clashUpstream(t, "lookup", "stock")
	_, c := clashUpstream(t, "lookup", "refund", "ping")
	dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: a: url: %q\n", a))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	gen := s.srv.cur.Load().n
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(fmt.Sprintf(threeServersPolicy, a, b, c)), 0o644))
	err := s.srv.Reload(context.Background())
	require.Error(t, err)
	assert.Regexp(t, wantThreeServerClash, err.Error())
	assert.Equal(t, gen, s.srv.cur.Load().n, "the previous policy stays served")
}

// TestMCPToolNameClashOnListChangeNamesEveryServer: a server whose new
// list takes names two other servers serve was reported against the
// first of them only. The log names each name with both its servers.
func TestMCPToolNameClashOnListChangeNamesEveryServer(t *testing.T) {
	_, a := clashUpstream(t, "lookup")
	_, b := clashUpstream(t, "stock")
	srvC, c := clashUpstream(t, "ping")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(threeServersPolicy, a, b, c))), WatchInterval: -1})
	addNamedTool(srvC, "stock")
	addNamedTool(srvC, "lookup")
	require.Eventually(t, func() bool {
		logs := s.logs.String()
		return strings.Contains(logs, "mcp upstream tools changed but could not be served") && strings.Contains(logs, `\"lookup\"`)
	}, 5*time.Second, 10*time.Millisecond)
	// The list may be taken once stock is added and again once lookup
	// is: the line that reports lookup reports stock too.
	var line string
	for l := range strings.Lines(s.logs.String()) {
		if strings.Contains(l, `\"lookup\"`) {
			line = l
		}
	}
	assert.Regexp(t, `tool \\"lookup\\" is served by both \\"a\\" and \\"c\\" \(declared at policy\.cue:4:\d+ and policy\.cue:6:\d+\); give one of them a prefix`, line)
	assert.Regexp(t, `tool \\"stock\\" is served by both \\"b\\" and \\"c\\" \(declared at policy\.cue:5:\d+ and policy\.cue:6:\d+\); give one of them a prefix`, line)
}

// TestMCPToolNameClashNamesThePolicyDirectory: the clash named the
// servers' declarations relative to the policy's directory (policy.cue:4:7)
// where the log and the reload's diagnostics name the directory too
// (Loaded.PosDir).
func TestMCPToolNameClashNamesThePolicyDirectory(t *testing.T) {
	_, a := clashUpstream(t, "lookup")
	_, b := clashUpstream(t, "lookup")
	_, c := clashUpstream(t, "ping")
	dir := writePolicy(t, fmt.Sprintf(threeServersPolicy, a, b, c))
	src := SourceFunc(func(ctx context.Context) (*Loaded, error) {
		ld, err := cueSource(dir).Load(ctx)
		if ld != nil {
			ld.PosDir = "pol"
		}
		return ld, err
	})
	_, err := New(context.Background(), Options{Source: src, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.Error(t, err)
	at := regexp.QuoteMeta(filepath.Join("pol", "policy.cue"))
	assert.Regexp(t, `^`+at+`:5:\d+: mcp: tool "lookup" is served by both "a" and "b" \(declared at `+at+`:4:\d+ and `+at+`:5:\d+\)`, err.Error())
}
