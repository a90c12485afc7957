package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPNamesWithColonOrSlashLogNoError: a tool served as "a:b" or
// "ns/tool" (characters a prefix may add) logged an ERROR of the SDK,
// "AddTool: invalid tool name", on every load and listing, though it is
// served and works. It is noted once, at info level.
func TestMCPNamesWithColonOrSlashLogNoError(t *testing.T) {
	upstream, calls := namesUpstream(t, "a:b", "tool")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(unnamablePolicy, upstream, `, prefix: "ns/"`))), WatchInterval: -1})
	require.NoError(t, s.srv.Reload(context.Background()))
	cs := connectProxy(t, s.url, "", nil)
	assert.Equal(t, []string{"ns/a:b", "ns/tool"}, listedTools(t, cs))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ns/a:b", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "done", text(t, res))
	assert.Equal(t, 1, calls("a:b"))
	logs := s.logs.String()
	assert.NotContains(t, logs, "level=ERROR")
	assert.NotContains(t, logs, "AddTool")
	assert.Equal(t, 1, strings.Count(logs, `tool=ns/a:b`), logs)
	assert.Contains(t, logs, `level=INFO msg="mcp tool served under a name with \":\" or \"/\"`)
}

// TestMCPProgressTokenOfAnotherTypeRefused: a progressToken that is an
// object (or a fraction) was accepted and echoed; MCP allows a string or
// an integer. The call is refused with invalid params, and never sent.
func TestMCPProgressTokenOfAnotherTypeRefused(t *testing.T) {
	upstream, calls := namesUpstream(t, "ok")
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(unnamablePolicy, upstream, ""))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	for _, tok := range []any{map[string]any{"a": 1}, []any{1}, 1.5, true} {
		params := &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": tok}}
		_, err := cs.CallTool(ctx, params)
		require.Error(t, err, "%v", tok)
		var we *jsonrpc.Error
		require.True(t, errors.As(err, &we), "%v: %v", tok, err)
		assert.Equal(t, int64(jsonrpc.CodeInvalidParams), we.Code)
		assert.Contains(t, we.Message, "progressToken")
	}
	assert.Zero(t, calls("ok"))
	for _, tok := range []any{"t-1", 7} {
		params := &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": tok}}
		res, err := cs.CallTool(ctx, params)
		require.NoError(t, err, "%v", tok)
		assert.Equal(t, "done", text(t, res))
	}
}

// TestMCPToolNameClashNamesEveryTool: two unprefixed servers serving
// several same names reported the first only.
func TestMCPToolNameClashNamesEveryTool(t *testing.T) {
	a, _ := namesUpstream(t, "lookup", "refund", "stock", "own")
	b, _ := namesUpstream(t, "lookup", "refund", "stock")
	err := loadErr(t, fmt.Sprintf(`package gw

mcp: servers: {
	one: url: %q
	two: url: %q
}
`, a, b))
	assert.Regexp(t, `^policy\.cue:5:\d+: mcp: tools "lookup", "refund" and "stock" are served by both "one" and "two" \(declared at policy\.cue:4:\d+ and policy\.cue:5:\d+\); give one of them a prefix$`, err.Error())
}

// TestMCPAddedUndeclaredToolsWarned: a tool an upstream adds at run time
// has no declaration, so file_check and egress do not see its path or url
// arguments; the log said only that the tools changed. It names the tools
// added, and warns of those the policy does not declare.
func TestMCPAddedUndeclaredToolsWarned(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: notes: url: %q
tools: stock: {side_effecting: false}
chains: tool: [{use: "egress", allow: ["example.com"]}]
`, url))), WatchInterval: -1})
	connectProxy(t, s.url, "", nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "stock"}, echo.handle)
	changed := func(name string) bool {
		for _, l := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(l, "listed and scanned again") && strings.Contains(l, name) {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return changed("write_note") && changed("stock") }, 5*time.Second, 10*time.Millisecond)
	var warned []string
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "tools added that the policy does not declare") {
			warned = append(warned, l)
		}
	}
	require.Len(t, warned, 1, s.logs.String())
	assert.Contains(t, warned[0], "level=WARN")
	assert.Contains(t, warned[0], "tools=[write_note]")
	assert.Contains(t, warned[0], "server=notes")
}
