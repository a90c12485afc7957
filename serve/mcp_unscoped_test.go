package serve

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPUnscopedLayerCheckingNoServedToolFailsTheLoad: an unscoped
// file_check (egress with scan_args false) in front of MCP tools the policy
// does not declare, the policy written before agentc mcp-tools is run,
// checked nothing (no tool has path_arg, url_arg): serve loaded, and
// /etc/shadow and the metadata URL reached the upstream. The load now
// fails, naming the layer's position, the tools and what to declare; with
// one served tool declared with path_arg (url_arg), it loads and checks it.
func TestMCPUnscopedLayerCheckingNoServedToolFailsTheLoad(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	})
	root := t.TempDir()
	head := fmt.Sprintf("package gw\n\nkeys: agent: {sha256: %q}\nmcp: servers: up: {url: %q, prefix: \"pay_\"}\n", sha("agent-key"), url)
	fileCheck := fmt.Sprintf("chains: tool: [{use: \"file_check\", roots: [%q]}]\n", root)
	err := loadErr(t, head+fileCheck)
	assert.Regexp(t, `policy\.cue:\d+:\d+: chains\.tool\[0\] "file_check" checks nothing of the calls of the tools mcp servers serve: none of them \(pay_fetch, pay_write_note\) is declared with path_arg`, err.Error())
	assert.Contains(t, err.Error(), "declare the tools it should check with path_arg (agentc mcp-tools prints the declarations), or scope it with tools:")

	egress := "chains: tool: [{use: \"egress\", allow: [\"example.com\"], scan_args: false}]\n"
	err = loadErr(t, head+egress)
	assert.Regexp(t, `chains\.tool\[0\] "egress" checks nothing of the calls of the tools mcp servers serve: none of them \(pay_fetch, pay_write_note\) is declared with url_arg`, err.Error())

	// A tool declared without the argument does not help.
	decl := "tools: pay_write_note: {side_effecting: true, args: {type: \"object\", properties: {path: type: \"string\"}}}\n"
	err = loadErr(t, head+decl+fileCheck)
	assert.Contains(t, err.Error(), `"file_check" checks nothing of the calls`)

	// With scan_args on, egress checks every URL of a call: it loads.
	on := "chains: tool: [{use: \"egress\", allow: [\"example.com\"]}]\n"
	startServer(t, Options{Source: cueSource(writePolicy(t, head+on)), WatchInterval: -1})

	// Declared with path_arg, the tool is checked.
	decl = "tools: pay_write_note: {side_effecting: true, path_arg: \"path\", args: {type: \"object\", required: [\"path\"], properties: {path: type: \"string\", content: type: \"string\"}}}\n"
	s := startServer(t, Options{Source: cueSource(writePolicy(t, head+decl+fileCheck)), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay_write_note", Arguments: map[string]any{"path": "/etc/shadow", "content": "x"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by file_check")
	assert.Zero(t, echo.count("write_note"), "no unchecked call reached the upstream")
}

// TestMCPUnscopedLayerLeftCheckingNoServedToolRefuses: the load refuses an
// unscoped file_check none of whose served tools is declared with
// path_arg, but an upstream's list that changed at run time was not
// checked so: the one tool declared removed and another added, the layer
// checked nothing and /etc/shadow reached the new tool. Such a list is one
// that cannot be served: the tools added and changed are not served (their
// calls refused, never sent), the unchanged ones stay, and the listing logs
// why.
func TestMCPUnscopedLayerLeftCheckingNoServedToolRefuses(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	note := func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, note)
	root := t.TempDir()
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: {url: %q}
tools: write_note: {side_effecting: true, path_arg: "path", args: {type: "object", required: ["path"], properties: {path: type: "string", content: type: "string"}}}
chains: tool: [{use: "file_check", roots: [%q]}]
`, sha("agent-key"), url, root))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)

	srv.RemoveTools("write_note")
	mcp.AddTool(srv, &mcp.Tool{Name: "save_note"}, note)
	// The call of the tool not listed has the tools listed again.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "save_note", Arguments: map[string]any{"path": "/etc/shadow", "content": "x"}})
	if err == nil {
		assert.True(t, res.IsError, "the call is refused: %s", text(t, res))
	}
	assert.Zero(t, echo.count("save_note"), "no unchecked call reached the upstream")
	logs := s.logs.String()
	assert.Contains(t, logs, "mcp upstream tools changed but could not be served")
	assert.Contains(t, logs, `checks nothing of the calls of the tools mcp servers serve: none of them (fetch, save_note) is declared with path_arg`)
	// The unchanged tool is still served.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetch", Arguments: map[string]any{"url": "https://example.com/"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
}
