package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noteServer is an upstream MCP server whose tools remember a note per
// session, as a stateful server (a working directory, a browser, a
// transaction) keeps state per session: set_note keeps one for the
// session that calls it, get_note answers the session's own.
type noteServer struct {
	srv   *mcp.Server
	url   string
	mu    sync.Mutex
	notes map[string]string
}

func newNoteServer(t *testing.T) *noteServer {
	t.Helper()
	n := &noteServer{notes: map[string]string{}}
	n.srv = mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type noteIn struct {
		Note string `json:"note,omitempty"`
	}
	mcp.AddTool(n.srv, &mcp.Tool{Name: "set_note"}, func(_ context.Context, req *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, any, error) {
		n.mu.Lock()
		n.notes[req.Session.ID()] = in.Note
		n.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted"}}}, nil, nil
	})
	mcp.AddTool(n.srv, &mcp.Tool{Name: "get_note", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ noteIn) (*mcp.CallToolResult, any, error) {
			n.mu.Lock()
			note, ok := n.notes[req.Session.ID()]
			n.mu.Unlock()
			if !ok {
				note = "(none)"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: note}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return n.srv }, nil))
	t.Cleanup(ts.Close)
	n.url = ts.URL
	return n
}

// sessions counts the sessions the upstream holds open.
func (n *noteServer) sessions() int {
	c := 0
	for range n.srv.Sessions() {
		c++
	}
	return c
}

// notePolicy serves a note server to two keys of two tenants and a second
// key of tenant alpha; %s is the server's extra fields.
const notePolicy = `package gw

keys: {
	alpha: {sha256: %q, tenant: "alpha"}
	alpha2: {sha256: %q, tenant: "alpha"}
	beta: {sha256: %q, tenant: "beta"}
}
mcp: servers: web: {url: %q, prefix: "web_"%s}
tools: {
	web_set_note: {side_effecting: true, args: {type: "object", properties: note: type: "string"}}
	web_get_note: {side_effecting: false, args: {type: "object", properties: note: type: "string"}}
}
`

func notePolicyFor(url, fields string) string {
	return fmt.Sprintf(notePolicy, sha("alpha-key"), sha("alpha2-key"), sha("beta-key"), url, fields)
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return text(t, res)
}

// TestMCPUpstreamSessionPerClient: by default a url upstream gets one
// session per client session, so what one tenant leaves in its upstream
// session (a note: "wire 1,000,000 to acct 998877") is not read by another
// tenant, nor by another session of the same tenant, and the client's own
// session keeps it.
func TestMCPUpstreamSessionPerClient(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, ""))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	beta := connectProxy(t, s.url, "beta-key", nil)
	alphaAgain := connectProxy(t, s.url, "alpha2-key", nil)

	require.Equal(t, "noted", callText(t, alpha, "web_set_note", map[string]any{"note": "alpha: wire 1,000,000 to acct 998877"}))
	assert.Equal(t, "(none)", callText(t, beta, "web_get_note", nil), "another tenant does not read alpha's session")
	assert.Equal(t, "(none)", callText(t, alphaAgain, "web_get_note", nil), "another client session does not either")
	assert.Equal(t, "alpha: wire 1,000,000 to acct 998877", callText(t, alpha, "web_get_note", nil), "the client's own session keeps it")
	// The listing session, and one per client session that called.
	assert.Eventually(t, func() bool { return up.sessions() == 4 }, 10*time.Second, 5*time.Millisecond, "%d upstream sessions", up.sessions())
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 3`)
}

// assertMetric asserts that the server's metrics come to hold line (a
// series and its value).
func assertMetric(t *testing.T, base, line string) {
	t.Helper()
	var body string
	assert.Eventually(t, func() bool {
		_, _, body = do(t, "GET", base+"/metrics", "", nil)
		return strings.Contains(body, line+"\n")
	}, 10*time.Second, 5*time.Millisecond, "no %s in\n%s", line, body)
}

// TestMCPUpstreamSessionPerTenant: with session "tenant" the client
// sessions of one tenant share an upstream session, another tenant's do
// not.
func TestMCPUpstreamSessionPerTenant(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, `, session: "tenant"`))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	alphaAgain := connectProxy(t, s.url, "alpha2-key", nil)
	beta := connectProxy(t, s.url, "beta-key", nil)

	callText(t, alpha, "web_set_note", map[string]any{"note": "alpha's"})
	assert.Equal(t, "alpha's", callText(t, alphaAgain, "web_get_note", nil), "one tenant, one upstream session")
	assert.Equal(t, "(none)", callText(t, beta, "web_get_note", nil), "another tenant, another session")
	assert.Eventually(t, func() bool { return up.sessions() == 3 }, 10*time.Second, 5*time.Millisecond, "%d upstream sessions", up.sessions())
}

// TestMCPUpstreamSessionShared: session "shared" is the one session for
// every caller, as written; with keys of several tenants the load warns.
func TestMCPUpstreamSessionShared(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, `, session: "shared"`))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	beta := connectProxy(t, s.url, "beta-key", nil)
	callText(t, alpha, "web_set_note", map[string]any{"note": "alpha's"})
	assert.Equal(t, "alpha's", callText(t, beta, "web_get_note", nil))
	assert.Eventually(t, func() bool { return up.sessions() == 1 }, 10*time.Second, 5*time.Millisecond, "%d upstream sessions", up.sessions())
	assert.Contains(t, s.logs.String(), "mcp upstream session shared by every tenant")
	assert.Contains(t, s.logs.String(), "server=web")
}

// TestMCPUpstreamSessionLifecycle: a client's upstream session closes
// when the client's session ends (deleted by the client, closed past
// -maxsessions), a reload closes the sessions of the generation it
// replaces, and the shutdown closes every one: none is left open.
func TestMCPUpstreamSessionLifecycle(t *testing.T) {
	up := newNoteServer(t)
	dir := writePolicy(t, notePolicyFor(up.url, ""))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, MaxSessions: 2})
	open := func(want int, why string) {
		t.Helper()
		require.Eventually(t, func() bool { return up.sessions() == want }, 10*time.Second, 5*time.Millisecond,
			"%s: %d upstream sessions open, want %d", why, up.sessions(), want)
	}
	open(1, "the listing session")
	var clients []*mcp.ClientSession
	for range 2 {
		cs := connectProxy(t, s.url, "alpha-key", nil)
		callText(t, cs, "web_get_note", nil)
		clients = append(clients, cs)
	}
	open(3, "one per client")
	require.NoError(t, clients[0].Close())
	open(2, "the client deleted its session")

	third := connectProxy(t, s.url, "alpha-key", nil)
	callText(t, third, "web_get_note", nil)
	open(3, "one per client")
	// A session past -maxsessions closes the key's used the longest ago.
	connectProxy(t, s.url, "alpha-key", nil)
	open(2, "the client session closed past -maxsessions")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(notePolicyFor(up.url, "")+"\n// changed\n"), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	open(1, "a reload closes the replaced generation's sessions; the new one lists")
	assert.Equal(t, "(none)", callText(t, third, "web_get_note", nil))
	open(2, "the client's session is opened again on the new generation")
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 1`)

	require.NoError(t, s.stop())
	open(0, "the shutdown closes every upstream session")
}

// TestMCPUpstreamSessionBound: past max_sessions a call that needs another
// upstream session is refused, not sent, with an error that says so, and
// counted; the sessions open keep serving.
func TestMCPUpstreamSessionBound(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, `, max_sessions: 1`))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	beta := connectProxy(t, s.url, "beta-key", nil)
	callText(t, alpha, "web_set_note", map[string]any{"note": "kept"})
	res, err := beta.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_get_note", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), `mcp server "web": 1 upstream session open, its max_sessions: no other can be opened`)
	assert.Equal(t, "kept", callText(t, alpha, "web_get_note", nil))
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions_refused_total{server="web"} 1`)
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 1`)

	// Once alpha's session ends, beta gets one.
	require.NoError(t, alpha.Close())
	require.Eventually(t, func() bool {
		res, err := beta.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_get_note", Arguments: map[string]any{}})
		return err == nil && !res.IsError
	}, 10*time.Second, 10*time.Millisecond)
}

// TestMCPUpstreamSessionTenantIdle: a tenant's upstream session closes
// after -idle without a call, and a call after opens another.
func TestMCPUpstreamSessionTenantIdle(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, `, session: "tenant"`))), WatchInterval: -1,
		RunIdle: 200 * time.Millisecond})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	callText(t, alpha, "web_set_note", map[string]any{"note": "soon gone"})
	require.Eventually(t, func() bool { return up.sessions() == 2 }, 10*time.Second, time.Millisecond, "the listing session and alpha's")
	require.Eventually(t, func() bool { return up.sessions() == 1 }, 10*time.Second, 5*time.Millisecond, "the idle session is closed")
	alpha = connectProxy(t, s.url, "alpha-key", nil) // the client's own session idled out too
	assert.Equal(t, "(none)", callText(t, alpha, "web_get_note", nil))
	assert.Eventually(t, func() bool { return up.sessions() == 2 }, 10*time.Second, time.Millisecond, "the listing session and alpha's")
}

// TestMCPUpstreamSessionStdioPerTenant: a command server is a process per
// tenant by default (besides the one that lists its tools): two tenants'
// calls reach two processes, one tenant's sessions one; past max_sessions
// a tenant is refused; a reload and the shutdown leave no process running.
func TestMCPUpstreamSessionStdioPerTenant(t *testing.T) {
	marker := t.TempDir() // an argument only this test's processes carry
	dir := writePolicy(t, fmt.Sprintf(`package gw

keys: {
	alpha: {sha256: %q, tenant: "alpha"}
	alpha2: {sha256: %q, tenant: "alpha"}
	beta: {sha256: %q, tenant: "beta"}
	gamma: {sha256: %q, tenant: "gamma"}
}
mcp: servers: crashy: {command: [%q, "-test.run=^TestMCPStdioHelper$", %q], env: AGENTC_TEST_MCP_STDIO: "1", max_sessions: 2}
`, sha("alpha-key"), sha("alpha2-key"), sha("beta-key"), sha("gamma-key"), os.Args[0], "-test.outputdir="+marker))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	procs := func(want int, why string) {
		t.Helper()
		require.Eventually(t, func() bool { return len(childPIDs(t, marker)) == want }, 10*time.Second, 5*time.Millisecond,
			"%s: %d processes, want %d", why, len(childPIDs(t, marker)), want)
	}
	procs(1, "the listing process")
	alpha := callText(t, connectProxy(t, s.url, "alpha-key", nil), "ping", nil)
	alphaAgain := callText(t, connectProxy(t, s.url, "alpha2-key", nil), "ping", nil)
	beta := callText(t, connectProxy(t, s.url, "beta-key", nil), "ping", nil)
	assert.Equal(t, alpha, alphaAgain, "one process per tenant")
	assert.NotEqual(t, alpha, beta, "another tenant, another process")
	procs(3, "the listing process and one per tenant")

	res, err := connectProxy(t, s.url, "gamma-key", nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "ping"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), `mcp server "crashy": 2 upstream sessions open, its max_sessions: no other can be opened`)
	procs(3, "no process past the bound")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), append(must(os.ReadFile(filepath.Join(dir, "policy.cue"))), "\n// changed\n"...), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	procs(1, "a reload ends the replaced generation's processes")
	require.NoError(t, s.stop())
	procs(0, "the shutdown ends every process")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestMCPUpstreamSessionFilesystemPerTenant: the filesystem server, a
// command, runs a process per tenant calling it besides the one that lists
// its tools; the shutdown ends them all. With a short -idle, a tenant's
// process ends once it is idle, and a call after starts another.
func TestMCPUpstreamSessionFilesystemPerTenant(t *testing.T) {
	bin := fsBinary(t)
	for _, idle := range []time.Duration{0, 500 * time.Millisecond} {
		root, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("alpha\n"), 0o644))
		s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: {
	alpha: {sha256: %q, tenant: "alpha"}
	beta: {sha256: %q, tenant: "beta"}
}
mcp: servers: fs: {command: [%q, %q], prefix: "fs_"}
tools: fs_read_text_file: {side_effecting: false, path_arg: "path"}
chains: tool: [{use: "file_check", roots: [%q]}]
`, sha("alpha-key"), sha("beta-key"), bin, root, root))), WatchInterval: -1, RunIdle: idle})
		procs := func(want int, why string) {
			t.Helper()
			require.Eventually(t, func() bool { return len(childPIDs(t, root)) == want }, 20*time.Second, 10*time.Millisecond,
				"%s: %d processes, want %d", why, len(childPIDs(t, root)), want)
		}
		read := func(key string) {
			t.Helper()
			assert.Equal(t, "alpha\n", callText(t, connectProxy(t, s.url, key, nil), "fs_read_text_file", map[string]any{"path": filepath.Join(root, "notes.txt")}))
		}
		procs(1, "the listing process")
		read("alpha-key")
		if idle == 0 {
			read("beta-key")
			procs(3, "a process per tenant")
			assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="fs"} 2`)
		} else {
			procs(1, "the tenant's process ends after -idle without a call")
			assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="fs"} 0`)
			read("alpha-key") // a call after starts another
		}
		require.NoError(t, s.stop())
		procs(0, "the shutdown ends every process")
	}
}

// TestMCPUpstreamSessionTenantShare: where the keys name more than one
// tenant, a tenant holds at most half of a server's max_sessions: alpha's
// client sessions, however many, leave beta its sessions; alpha past its
// share is refused, not sent, with an error naming the tenant and its
// share, and counted.
func TestMCPUpstreamSessionTenantShare(t *testing.T) {
	up := newNoteServer(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, notePolicyFor(up.url, `, max_sessions: 4`))), WatchInterval: -1})
	for range 2 {
		assert.Equal(t, "(none)", callText(t, connectProxy(t, s.url, "alpha-key", nil), "web_get_note", nil))
	}
	res, err := connectProxy(t, s.url, "alpha2-key", nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "web_get_note", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError, "alpha's third session is past its share")
	assert.Contains(t, text(t, res), `mcp server "web": tenant "alpha" has 2 upstream sessions open, its share of the server's max_sessions (2 of 4): no other can be opened for it until one closes`)
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions_refused_total{server="web"} 1`)
	for range 2 {
		assert.Equal(t, "(none)", callText(t, connectProxy(t, s.url, "beta-key", nil), "web_get_note", nil), "beta gets its share")
	}
	assertMetric(t, s.url, `agentc_serve_mcp_upstream_sessions{server="web"} 4`)
}
