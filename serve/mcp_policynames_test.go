package serve

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadToolNameRefusesNamesThePolicyCannotWrite: a name starting with a
// digit, "-", "." or "/" holds only valid characters, but the policy
// language writes no such name (a name starts with a letter or _): no
// rule could deny it, no declaration give its path argument.
func TestBadToolNameRefusesNamesThePolicyCannotWrite(t *testing.T) {
	for _, name := range []string{"9x", "1abc", "-del", ".hidden", "/root", ":x", "", "r\u0435fund"} {
		assert.NotNil(t, badToolName(name), "%q", name)
	}
	for _, name := range []string{"x", "_x", "x9", "a:b", "ns/tool", "a.b-c", "fs_9x"} {
		assert.Nil(t, badToolName(name), "%q", name)
	}
	assert.Contains(t, badToolName("9x").Message, `starts with "9"`)
}

const unnamablePolicy = `package gw

mcp: servers: pay: {url: %q%s}
chains: tool: [{use: "tool_policy", deny: ["other"]}]
`

// TestMCPToolNamesThePolicyCannotWriteWithheld: upstream tools named 9x,
// 1abc, -del, .hidden and /root were listed and called (a path argument
// of /etc/shadow reached the upstream) though no rule of the policy can
// name them. They are withheld as names of invalid characters are; a
// prefix that makes the name one the policy writes serves them.
func TestMCPToolNamesThePolicyCannotWriteWithheld(t *testing.T) {
	bad := []string{"9x", "1abc", "-del", ".hidden", "/root"}
	upstream, calls := namesUpstream(t, append([]string{"ok"}, bad...)...)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(unnamablePolicy, upstream, ""))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	assert.Equal(t, []string{"ok"}, listedTools(t, cs))
	ctx := context.Background()
	for _, name := range bad {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "/etc/shadow"}})
		if err == nil {
			assert.True(t, res.IsError, "%q is refused", name)
		}
		assert.Zero(t, calls(name), "the upstream never sees a call of %q", name)
		assert.Contains(t, s.logs.String(), fmt.Sprintf("tool=%s server=pay", name))
	}
	assert.Contains(t, s.logs.String(), "mcp tool withheld: its name is not a valid MCP tool name")

	upstream, calls = namesUpstream(t, "9x", "-del", "ok")
	s = startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(unnamablePolicy, upstream, `, prefix: "fs_"`))), WatchInterval: -1})
	cs = connectProxy(t, s.url, "", nil)
	assert.Equal(t, []string{"fs_-del", "fs_9x", "fs_ok"}, listedTools(t, cs))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_9x", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "done", text(t, res))
	assert.Equal(t, 1, calls("9x"))
}
