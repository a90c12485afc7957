package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notesUpstream serves a go-sdk MCP server with fetch (url), counted by
// echo, and returns its URL and the server, to which a test adds tools
// (write_note: noteIn).
func notesUpstream(t *testing.T, echo *countingEcho) (string, *mcp.Server) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type fetchIn struct {
		URL string `json:"url"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "fetch", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ fetchIn) (*mcp.CallToolResult, any, error) {
			return echo.handle(ctx, req, struct{}{})
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, srv
}

type noteIn struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
}

// loadErr returns the error of a server started on policy, which must
// fail to load.
func loadErr(t *testing.T, policy string) error {
	t.Helper()
	srv, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, policy)), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err == nil {
		_ = srv.Close()
	}
	require.Error(t, err)
	return err
}

// TestMCPLayerScopedToAnUndeclaredToolFailsTheLoad: file_check, and egress
// with scan_args false, scoped by tools: to an MCP tool the policy does not
// declare checked nothing of its calls (such a tool has no path_arg or
// url_arg): the metadata URL and /etc/shadow went through. The load now
// fails as vet fails a declared tool without them, naming the layer's
// position, the tool, its server and what to declare; declared, the layers
// check the calls.
func TestMCPLayerScopedToAnUndeclaredToolFailsTheLoad(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	})
	root := t.TempDir()
	head := fmt.Sprintf("package gw\n\nkeys: agent: {sha256: %q}\nmcp: servers: up: {url: %q, prefix: \"pay_\"}\n", sha("agent-key"), url)
	chains := fmt.Sprintf(`chains: tool: [
	{use: "egress", allow: ["example.com"], scan_args: false, tools: ["pay_fetch"]},
	{use: "file_check", roots: [%q], tools: ["pay_write_note"]},
]
`, root)
	err := loadErr(t, head+chains)
	assert.Regexp(t, `policy\.cue:\d+:\d+: chains\.tool\[0\] "egress" is scoped to tool "pay_fetch", which mcp server "up" serves and the policy does not declare with url_arg`, err.Error())
	assert.Contains(t, err.Error(), "its calls would pass unchecked; declare tools: pay_fetch with url_arg (agentc mcp-tools prints the declaration)")
	assert.Regexp(t, `policy\.cue:\d+:\d+: chains\.tool\[1\] "file_check" is scoped to tool "pay_write_note", which mcp server "up" serves and the policy does not declare with path_arg`, err.Error())

	// scan_args on: egress checks every URL of the call, the scope is fine.
	on := `chains: tool: [{use: "egress", allow: ["example.com"], tools: ["pay_fetch"]}]
`
	s := startServer(t, Options{Source: cueSource(writePolicy(t, head+on)), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay_fetch", Arguments: map[string]any{"url": "http://169.254.169.254/latest/meta-data"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by egress")

	// Declared with url_arg and path_arg, the layers check the calls.
	decl := `tools: {
	pay_fetch: {side_effecting: false, url_arg: "url", args: {type: "object", required: ["url"], properties: url: type: "string"}}
	pay_write_note: {side_effecting: true, path_arg: "path", args: {type: "object", required: ["path"], properties: {path: type: "string", content: type: "string"}}}
}
`
	s = startServer(t, Options{Source: cueSource(writePolicy(t, head+decl+chains)), WatchInterval: -1})
	cs = connectProxy(t, s.url, "agent-key", nil)
	for name, args := range map[string]map[string]any{
		"pay_fetch":      {"url": "http://169.254.169.254/latest/meta-data"},
		"pay_write_note": {"path": "/etc/shadow", "content": "x"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		assert.True(t, res.IsError, name)
		assert.Contains(t, text(t, res), "blocked by", name)
	}
	assert.Zero(t, echo.count("fetch")+echo.count("write_note"), "no unchecked call reached the upstream")
}

// TestMCPLayerScopedToAToolAddedLaterFailsClosed: a tool an upstream adds
// after the load, which a file_check layer's tools: names, has no
// path_arg: its calls are refused by the layer, not passed unchecked.
func TestMCPLayerScopedToAToolAddedLaterFailsClosed(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	root := t.TempDir()
	policy := fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: {url: %q}
chains: tool: [{use: "file_check", roots: [%q], tools: ["write_note"]}]
`, sha("agent-key"), url, root)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "/etc/shadow", "content": "x"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "blocked by file_check: tool write_note declares no path_arg")
	assert.Zero(t, echo.count("write_note"))
	assert.Contains(t, s.logs.String(), `a layer is scoped to a tool it cannot check, whose calls it refuses`)
}

// TestMCPMisspeltToolNameFailsTheLoad: a tool_policy deny or a layer's
// tools: naming a tool no upstream serves and the policy does not declare
// applied to nothing: deny: ["pay_refnd"] let pay_refund run, a guard
// scoped to "pay_wirte_note" guarded nothing, and the load said nothing.
// A name close to a tool served is now an error naming the layer's
// position and the tool meant; a name close to none is a warning (a deny
// kept for a tool an upstream may add), and the policy loads.
func TestMCPMisspeltToolNameFailsTheLoad(t *testing.T) {
	var echo countingEcho
	url, srv := notesUpstream(t, &echo)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
		return echo.handle(ctx, req, struct{}{})
	})
	head := fmt.Sprintf("package gw\n\nkeys: agent: {sha256: %q}\nmcp: servers: up: {url: %q, prefix: \"pay_\"}\n", sha("agent-key"), url)
	err := loadErr(t, head+`chains: tool: [
	{use: "tool_policy", deny: ["pay_fetc", "pay_Fetch"]},
	{use: "guard", tools: ["pay_wirte_note"], deny: "true"},
	{use: "tool_policy", name: "only", allow: ["pay_fetch", "pay_write_not"]},
]
`)
	for _, want := range []string{
		`chains.tool[0] "tool_policy" deny[0] names tool "pay_fetc", which no mcp server serves and the policy does not declare: did you mean "pay_fetch"?`,
		`chains.tool[0] "tool_policy" deny[1] names tool "pay_Fetch", which no mcp server serves and the policy does not declare: did you mean "pay_fetch"?`,
		`chains.tool[1] "guard" tools[0] names tool "pay_wirte_note", which no mcp server serves and the policy does not declare: did you mean "pay_write_note"?`,
		`chains.tool[2] "only" allow[1] names tool "pay_write_not"`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Regexp(t, `policy\.cue:\d+:\d+: chains\.tool\[0\]`, err.Error())
	assert.Contains(t, err.Error(), "declare it in tools:")

	// A name close to no tool served is a warning; the policy loads.
	s := startServer(t, Options{Source: cueSource(writePolicy(t, head+`chains: tool: [{use: "tool_policy", deny: ["delete_everything"]}]
`)), WatchInterval: -1})
	assert.Regexp(t, `level=WARN msg="a rule names a tool no mcp server serves and the policy does not declare; it applies to no tool served now" .*deny\[0\] names tool \\"delete_everything\\"`, s.logs.String())

	// Declared, a name is known: no error, no warning.
	s = startServer(t, Options{Source: cueSource(writePolicy(t, head+`tools: pay_fetc: side_effecting: true
chains: tool: [{use: "tool_policy", deny: ["pay_fetc"]}]
`)), WatchInterval: -1})
	assert.NotContains(t, s.logs.String(), "applies to no tool served now")
}

// TestMCPToolNameClashNamesTheServersPositions: two servers serving one
// tool name fail the load; the error named the servers but not where the
// policy declares them. It now starts with the position of the second and
// gives both.
func TestMCPToolNameClashNamesTheServersPositions(t *testing.T) {
	var echo countingEcho
	url, _ := notesUpstream(t, &echo)
	err := loadErr(t, fmt.Sprintf(`package gw

mcp: servers: {
	one: url: %q
	two: url: %q
}
`, url, url))
	assert.Regexp(t, `^policy\.cue:5:\d+: mcp: tool "fetch" is served by both "one" and "two" \(declared at policy\.cue:4:\d+ and policy\.cue:5:\d+\); give one of them a prefix$`, err.Error())
}

// TestMCPMisspeltToolNameInAPredicateFailsTheLoad: a guard's predicate
// comparing tool.name with a name no upstream serves (the real filesystem
// server here) never fired, and the load said nothing, while the same
// name in tools: or a deny failed it. A string tool.name is tested with
// (==, in, startsWith) close to a tool served is now an error at the
// string's position naming the tool meant; one close to none a warning.
func TestMCPMisspeltToolNameInAPredicateFailsTheLoad(t *testing.T) {
	bin := fsBinary(t)
	root := t.TempDir()
	head := fmt.Sprintf("package gw\n\nmcp: servers: fs: {command: [%q, %q], prefix: \"fs_\"}\n", bin, root)
	err := loadErr(t, head+`chains: tool: [
	{use: "guard", name: "no_writes", deny: "tool.name == 'fs_wirte_file'"},
	{use: "guard", name: "no_moves", deny: "tool.name in ['fs_read_text_file', 'fs_mvoe_file']"},
	{use: "guard", name: "no_edits", when: "tool.name.startsWith('fs_edti')", deny: "true"},
]
`)
	for _, re := range []string{
		`policy\.cue:5:56: chains\.tool\[0\] "no_writes" deny compares tool\.name with "fs_wirte_file", which no mcp server serves and the policy does not declare: did you mean "fs_write_file"\?`,
		`policy\.cue:6:77: chains\.tool\[1\] "no_moves" deny compares tool\.name with "fs_mvoe_file", which no mcp server serves and the policy does not declare: did you mean "fs_move_file"\?`,
		`policy\.cue:7:63: chains\.tool\[2\] "no_edits" when: tool\.name\.startsWith\("fs_edti"\) holds for no tool an mcp server serves or the policy declares: did you mean "fs_edit"\?`,
	} {
		assert.Regexp(t, re, err.Error())
	}
	assert.NotContains(t, err.Error(), "fs_read_text_file")

	// A name close to no tool served is a warning; the policy loads.
	s := startServer(t, Options{Source: cueSource(writePolicy(t, head+`chains: tool: [
	{use: "guard", name: "g", deny: "tool.name == 'drop_database' || tool.name.endsWith('_everything')"},
]
`)), WatchInterval: -1})
	logs := s.logs.String()
	assert.Regexp(t, `level=WARN msg="a rule names a tool no mcp server serves and the policy does not declare; it applies to no tool served now" rule=.*policy\.cue:5:\d+: chains\.tool\[0\] \\"g\\" deny compares tool\.name with \\"drop_database\\"`, logs)
	assert.Contains(t, logs, `tool.name.endsWith(\"_everything\")`)
}

// TestMCPShortPrefixOfToolsNotServedLoads: a guard denying the tools of
// another server's prefix (db_, gh_), meant for tools not served here,
// failed the load beside a server prefixed fs_: a prefix within two edits
// of the start of a name served, cut to its length, was taken for a
// misspelling ("did you mean \"fs_\"?"). Only a string of four characters
// or more, one edit from a part of a name as long that ends where a word
// of it does, is now a misspelling; another is a warning, and the policy
// loads.
func TestMCPShortPrefixOfToolsNotServedLoads(t *testing.T) {
	bin := fsBinary(t)
	head := fmt.Sprintf("package gw\n\nmcp: servers: fs: {command: [%q, %q], prefix: \"fs_\"}\n", bin, t.TempDir())
	for _, pred := range []string{"tool.name.startsWith('db_')", "tool.name.startsWith('gh_')", "tool.name.startsWith('x')", "tool.name.startsWith('fs_q')"} {
		t.Run(pred, func(t *testing.T) {
			s := startServer(t, Options{Source: cueSource(writePolicy(t, head+fmt.Sprintf("chains: tool: [{use: \"guard\", name: \"g\", deny: %q}]\n", pred))), WatchInterval: -1})
			logs := s.logs.String()
			assert.Contains(t, logs, `level=WARN msg="a rule names a tool no mcp server serves and the policy does not declare; it applies to no tool served now"`)
			assert.Contains(t, logs, strings.ReplaceAll(strings.ReplaceAll(pred, "'", `\"`), "tool.name", `\"g\" deny: tool.name`))
		})
	}

	// A suffix one edit from the end of a name served, where a word of it
	// starts, is still taken for a misspelling.
	err := loadErr(t, head+`chains: tool: [{use: "guard", name: "g", deny: "tool.name.endsWith('_fiel')"}]
`)
	assert.Regexp(t, `chains\.tool\[0\] "g" deny: tool\.name\.endsWith\("_fiel"\) holds for no tool an mcp server serves or the policy declares: did you mean "_file"\?`, err.Error())
}
