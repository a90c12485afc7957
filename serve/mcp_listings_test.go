package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// oneListHeld holds the next tools/list srv answers once armed, until
// released, and answers it with the tools named stale instead of srv's.
type oneListHeld struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func holdOneList(srv *mcp.Server, stale string) *oneListHeld {
	h := &oneListHeld{held: make(chan struct{}), release: make(chan struct{})}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && h.armed.CompareAndSwap(true, false) {
				close(h.held)
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: stale, InputSchema: map[string]any{"type": "object"}}}}, nil
			}
			return next(ctx, method, req)
		}
	})
	return h
}

// listWaits returns the calls of s waiting for the tools of the upstream
// server to be listed again.
func listWaits(s *served, server string) float64 {
	var m dto.Metric
	if s.srv.metrics.listWaits.WithLabelValues(server).Write(&m) != nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

// called is the answer to a tool call.
type called struct {
	res *mcp.CallToolResult
	err error
}

// callDuringAChange has srv, upstream "up" of s, change x's description
// and its listing held, then calls tool on cs, and returns the call's
// answer once the call waits for the listing.
func callDuringAChange(t *testing.T, s *served, srv *mcp.Server, lists *listHold, cs *mcp.ClientSession, tool string) <-chan called {
	t.Helper()
	lists.hold()
	srv.AddTool(objectTool("x", "Version two."), ran)
	lists.waitHeld(t)
	done := make(chan called, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		done <- called{res, err}
	}()
	require.Eventually(t, func() bool { return listWaits(s, "up") > 0 }, 10*time.Second, 5*time.Millisecond, "the call waits for the new list")
	return done
}

// failLists has srv fail as many of its next tools/list requests as the
// count returned is set to.
func failLists(srv *mcp.Server) *atomic.Int32 {
	var fails atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && fails.Add(-1) >= 0 {
				return nil, errors.New("listing failed")
			}
			return next(ctx, method, req)
		}
	})
	return &fails
}

// ran answers a call of a tool with "ran" and its name.
func ran(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + req.Params.Name}}}, nil
}

// serveUpstream serves srv on a loopback port and returns its URL.
func serveUpstream(t *testing.T, srv *mcp.Server) string {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// objectTool is a tool taking any object, described as desc.
func objectTool(name, desc string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}}
}

// TestMCPListingOfAReplacedSessionIsNotRecorded: the tools are listed for
// a change on a caller's session, and that session ends and is opened
// again while the listing is under way. The listing it answers describes
// a session no longer in use: it is not the one recorded, nor the one the
// served tools are built from; the tools are listed on a session in use.
func TestMCPListingOfAReplacedSessionIsNotRecorded(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(objectTool("current", ""), ran)
	hold := holdOneList(srv, "stale")
	url := serveUpstream(t, srv)
	ups, err := connectUpstreams(context.Background(), map[string]plan.MCPServer{"web": {URL: url}}, t.TempDir(), nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil, 0, nil)
	require.NoError(t, err)
	t.Cleanup(ups.close)
	web := ups.servers["web"]

	ctx := withUpstreamCaller(context.Background(), upstreamCaller{session: "s1", tenant: "alpha"})
	conn, release, err := web.take(ctx)
	require.NoError(t, err)
	defer release()
	first, err := conn.session(ctx)
	require.NoError(t, err)

	hold.armed.Store(true)
	web.mu.Lock()
	web.via = conn
	web.mu.Unlock()
	type listed struct {
		tools []*mcp.Tool
		err   error
	}
	done := make(chan listed, 1)
	go func() {
		tools, err := web.listTools(ctx)
		done <- listed{tools, err}
	}()
	<-hold.held
	conn.lost(first) // the session ended under the listing
	second, err := conn.session(ctx)
	require.NoError(t, err)
	require.NotSame(t, first, second, "the session was opened again")
	close(hold.release)
	got := <-done
	require.NoError(t, got.err)

	var names []string
	for _, tool := range got.tools {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"current"}, names, "the tools served are listed on a session in use")
	web.mu.Lock()
	defer web.mu.Unlock()
	assert.Equal(t, listingPrint(byName(got.tools)), web.listedPrint, "the listing recorded is of a session in use")
}

// TestMCPToolBackAfterAFailedRebuild: an upstream changes a tool and
// adds one whose name another server serves, so the new list cannot be
// served: the changed tool is refused and no longer listed. Once the
// upstream is fixed (the clash removed; the tool as changed, or as it was
// before) and says so, the tool is listed, scanned and called again,
// without a restart.
func TestMCPToolBackAfterAFailedRebuild(t *testing.T) {
	for _, fix := range []string{"kept", "reverted"} {
		t.Run(fix, func(t *testing.T) {
			a := mcp.NewServer(&mcp.Implementation{Name: "a", Version: "1"}, nil)
			a.AddTool(objectTool("x", "Version one."), ran)
			b := mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil)
			b.AddTool(objectTool("y", "Why."), ran)
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: {a: url: %q, b: url: %q}
`, sha("agent-key"), serveUpstream(t, a), serveUpstream(t, b)))), WatchInterval: -1})
			cs := connectProxy(t, s.url, "agent-key", nil)
			require.Equal(t, "ran x", callText(t, cs, "x", nil))

			a.AddTool(objectTool("x", "Version two."), ran)
			a.AddTool(objectTool("y", "A clash."), ran)
			require.Eventually(t, func() bool {
				return strings.Contains(s.logs.String(), "mcp upstream tools changed but could not be served")
			}, 10*time.Second, 10*time.Millisecond)
			assert.Equal(t, []string{"y"}, listedTools(t, cs), "the changed tool is no longer listed")

			if fix == "reverted" {
				a.AddTool(objectTool("x", "Version one."), ran)
			}
			a.RemoveTools("y")
			require.Eventually(t, func() bool {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "x", Arguments: map[string]any{}})
				return err == nil && !res.IsError && text(t, res) == "ran x"
			}, 10*time.Second, 20*time.Millisecond, "x is served again once the upstream is fixed")
			assert.Equal(t, []string{"x", "y"}, listedTools(t, cs))
			want := map[string]string{"kept": "Version two.", "reverted": "Version one."}[fix]
			assert.Equal(t, want, listedDescriptions(t, cs)["x"])
		})
	}
}

// TestMCPCallDuringAnAnnouncedChangeWaitsForIt: an upstream says its
// tools changed (a tool's description) and a call of the changed tool
// comes while the new list is being listed and scanned: the call waits
// for the new list and runs on it, where it was refused for holding the
// list replaced (the client's retry ran).
func TestMCPCallDuringAnAnnouncedChangeWaitsForIt(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(objectTool("x", "Version one."), ran)
	lists := holdLists(srv)
	url := serveUpstream(t, srv)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: url: %q
`, sha("agent-key"), url))), WatchInterval: -1})
	t.Cleanup(lists.free)
	cs := connectProxy(t, s.url, "agent-key", nil)
	require.Equal(t, "ran x", callText(t, cs, "x", nil))

	done := callDuringAChange(t, s, srv, lists, cs, "x")
	lists.free()
	got := <-done
	require.NoError(t, got.err)
	assert.False(t, got.res.IsError, "the call was refused: %s", text(t, got.res))
	assert.Equal(t, "ran x", text(t, got.res))
	assert.Equal(t, "Version two.", listedDescriptions(t, cs)["x"])
}

// rollout serves two versions of an upstream at one URL, as a load
// balancer does during a rollout: a new session goes to the version next
// names, and stays on it.
type rollout struct {
	next     atomic.Value // "old" or "new"
	handlers map[string]http.Handler
	mu       sync.Mutex
	sessions map[string]string // session id: version
}

func newRollout(t *testing.T, old, new *mcp.Server) (*rollout, string) {
	t.Helper()
	r := &rollout{sessions: map[string]string{}, handlers: map[string]http.Handler{
		"old": mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil),
		"new": mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return new }, nil),
	}}
	r.next.Store("old")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("Mcp-Session-Id")
		r.mu.Lock()
		version, ok := r.sessions[id]
		r.mu.Unlock()
		if !ok {
			version = r.next.Load().(string)
		}
		r.handlers[version].ServeHTTP(&sessionNoted{ResponseWriter: w, r: r, version: version}, req)
	}))
	t.Cleanup(ts.Close)
	return r, ts.URL
}

// sessionNoted notes which version opened the session its response names.
type sessionNoted struct {
	http.ResponseWriter
	r       *rollout
	version string
}

func (w *sessionNoted) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

// Write notes the session too: a response written without WriteHeader
// has its header sent with its first write.
func (w *sessionNoted) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

func (w *sessionNoted) note() {
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.r.mu.Lock()
		if _, ok := w.r.sessions[id]; !ok {
			w.r.sessions[id] = w.version
		}
		w.r.mu.Unlock()
	}
}

func (w *sessionNoted) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestMCPRolloutDoesNotFlipTheList: an upstream is rolled out behind one
// URL, its old and new versions describing a tool differently, and the
// client sessions' upstream sessions land on either. The list served
// followed whichever session was opened last, flipping between the two
// versions (a generation and a list_changed to every client each time).
// It follows the new version once, and does not go back to a list it
// replaced: a session of the old version is refused the changed tool
// (never calling a definition not scanned), the unchanged tool runs on it.
func TestMCPRolloutDoesNotFlipTheList(t *testing.T) {
	version := func(desc string) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
		srv.AddTool(objectTool("x", desc), ran)
		srv.AddTool(objectTool("same", "Unchanged."), ran)
		return srv
	}
	lb, url := newRollout(t, version("Version one."), version("Version two."))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: url: %q
`, sha("agent-key"), url))), WatchInterval: -1})
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := connectProxy(t, s.url, "agent-key", nil).CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		require.NoError(t, err)
		return res
	}
	watcher := connectProxy(t, s.url, "agent-key", nil)
	require.Equal(t, "ran x", text(t, call("x")))

	lb.next.Store("new")
	call("x") // the new version's session has the new list listed, scanned and served
	require.Eventually(t, func() bool { return listedDescriptions(t, watcher)["x"] == "Version two." }, 10*time.Second, 10*time.Millisecond)
	served := s.srv.cur.Load().n
	require.Equal(t, "ran x", text(t, call("x")))

	lb.next.Store("old")
	for range 3 {
		res := call("x")
		require.True(t, res.IsError, "the old version's x ran: %s", text(t, res))
		assert.Contains(t, text(t, res), `blocked by mcp: tool "x" of mcp server "up" is not served on this upstream session`)
		assert.Equal(t, "ran same", text(t, call("same")), "the tool both versions describe alike runs")
	}
	assert.Equal(t, "Version two.", listedDescriptions(t, watcher)["x"], "the list served stays the new version's")
	assert.Equal(t, served, s.srv.cur.Load().n, "no generation went back to the old list")
	assert.Contains(t, s.logs.String(), "mcp upstream session lists the tools as a list served before and replaced")

	lb.next.Store("new")
	assert.Equal(t, "ran x", text(t, call("x")))
}

// TestMCPCallAfterAFailedListingWaitsForTheNext: an upstream says its
// tools changed (on its one session) and its listing fails, so its calls are refused until it
// is listed again, which the next call starts. That call waits for the
// listing it started and runs on the new list, where it was refused for
// holding the list replaced.
func TestMCPCallAfterAFailedListingWaitsForTheNext(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(objectTool("x", "Version one."), ran)
	fails := failLists(srv) // the next listings that fail
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: {url: %q, session: "shared"}
`, sha("agent-key"), serveUpstream(t, srv)))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	require.Equal(t, "ran x", callText(t, cs, "x", nil))

	fails.Store(1)
	srv.AddTool(objectTool("x", "Version two."), ran)
	require.Eventually(t, func() bool {
		return strings.Contains(s.logs.String(), "mcp upstream tools could not be listed again")
	}, 10*time.Second, 10*time.Millisecond)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "x", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "ran x", text(t, res))
	assert.Equal(t, "Version two.", listedDescriptions(t, cs)["x"])
}

// TestMCPCallWaitingForAListingIsCutAtShutdown: a call waiting for its
// upstream's tools to be listed again (the listing held), of a tool
// listed or of one not listed (which has the upstream list again),
// waited on the SDK's context, which the shutdown cut does not end: it
// held the shutdown past its cut, and was never answered. It is answered
// at the cut.
func TestMCPCallWaitingForAListingIsCutAtShutdown(t *testing.T) {
	for _, tool := range []string{"x", "z"} {
		t.Run(tool, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
			srv.AddTool(objectTool("x", "Version one."), ran)
			lists := holdLists(srv)
			t.Cleanup(lists.free)
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: up: url: %q
`, sha("agent-key"), serveUpstream(t, srv)))), ShutdownTimeout: 100 * time.Millisecond, WatchInterval: -1})
			// A client as the SDK makes it by default, which keeps its
			// session while the event stream ends before the answer is read.
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{key: "agent-key"}}}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cs.Close() })
			require.Equal(t, "ran x", callText(t, cs, "x", nil))

			done := callDuringAChange(t, s, srv, lists, cs, tool)
			require.NoError(t, s.stop(), "the waiting call does not outlast the cut")
			lists.free()
			got := <-done
			if tool == "z" {
				// Not listed: the SDK's refusal of an unknown tool.
				require.Error(t, got.err)
				assert.Contains(t, got.err.Error(), `unknown tool "z"`)
				return
			}
			require.NoError(t, got.err)
			require.True(t, got.res.IsError)
			assert.Contains(t, text(t, got.res), "shutting down")
		})
	}
}

// TestMCPCallWaitsForListingsOnceInAll: a call waited for its upstream's
// tools to be listed again before its tool chain ran (30 s at most), and
// again, as long as its context let it, when it was sent: the two waits
// share the call's time to wait, and a call that has spent it is refused,
// not sent, while the listing is still under way.
func TestMCPCallWaitsForListingsOnceInAll(t *testing.T) {
	u := &upstreamServer{name: "up", pending: make(chan struct{})}
	ctx := withListWait(context.Background())
	ctx.Value(listWaitKey{}).(*listWait).left.Store(0) // spent waiting before the chain ran
	done := make(chan error, 1)
	go func() { done <- u.admit(ctx, &upstreamTool{name: "x"}, nil, nil) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call waits for the listing again")
	}
	require.Error(t, err)
	assert.True(t, runtime.DidNotRun(err), "the call was not sent: %v", err)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
	assert.Contains(t, err.Error(), `mcp server "up": its tools were still being listed again`)
}

// TestMCPAnnouncedListSurvivesAFailedListing: the server announced its
// tools changed, to a list served and replaced before, and the listing
// for the announcement failed. The announcement was forgotten with it:
// the next listing found the list replaced and kept refusing its tools,
// the server having said nothing wrong. It is listed as announced.
func TestMCPAnnouncedListSurvivesAFailedListing(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	srv.AddTool(objectTool("x", "Version one."), ran)
	fails := failLists(srv) // the next listings that fail
	ups, err := connectUpstreams(context.Background(), map[string]plan.MCPServer{"web": {URL: serveUpstream(t, srv)}}, t.TempDir(), nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil, 0, nil)
	require.NoError(t, err)
	t.Cleanup(ups.close)
	web := ups.servers["web"]

	web.mu.Lock()
	web.replace(web.listedPrint) // served before, and replaced since
	web.main.announced = true
	web.mu.Unlock()
	fails.Store(1)
	_, err = web.listTools(context.Background())
	require.Error(t, err, "the listing fails")
	require.NotErrorIs(t, err, errListReplaced)

	tools, err := web.listTools(context.Background())
	require.NoError(t, err, "the list announced is listed")
	require.Len(t, tools, 1)
	assert.Equal(t, "Version one.", tools[0].Description)
}

// TestMCPAnnouncementIsListedWhereItWasMade: an upstream is rolled out,
// its listing session on the old version, the new version's list served
// (listed on a client's session of it) and the old one replaced. The new
// version announces a change on that client's session, whose client then
// goes away before the listing. The announcement stood for the server,
// not the session: the listing session was listed in its place and its
// list, the old version's, replaced, was taken as announced and served
// again, the list going back to the old version for a change the new
// version announced. An announcement is now the session's that made it:
// the listing session, which announced nothing, is listed as any
// session is, and the list it describes, replaced, is not served again.
func TestMCPAnnouncementIsListedWhereItWasMade(t *testing.T) {
	version := func(desc string) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
		srv.AddTool(objectTool("x", desc), ran)
		return srv
	}
	oldV, newV := version("Version one."), version("Version two.")
	lb, url := newRollout(t, oldV, newV)
	changes := make(chan struct{}, 8)
	ups, err := connectUpstreams(context.Background(), map[string]plan.MCPServer{"web": {URL: url}}, t.TempDir(), nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), 0, func(*upstreamServer) { changes <- struct{}{} }, 0, nil)
	require.NoError(t, err)
	t.Cleanup(ups.close)
	web := ups.servers["web"]
	oldPrint := web.listedPrint
	awaitChange := func() {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			t.Fatal("no change noted")
		}
	}

	// A client's session lands on the new version: its list is listed on
	// it and served, the old one replaced (as refreshMCP does).
	lb.next.Store("new")
	ctx := withUpstreamCaller(context.Background(), upstreamCaller{session: "client-1"})
	c, release, err := web.take(ctx)
	require.NoError(t, err)
	_, err = c.session(ctx)
	require.NoError(t, err)
	awaitChange()
	tools, err := web.listTools(ctx)
	require.NoError(t, err)
	require.Equal(t, "Version two.", tools[0].Description)
	web.mu.Lock()
	web.replace(oldPrint)
	web.mu.Unlock()

	// The new version announces a change on the client's session, and
	// the client goes away before it is listed.
	newV.AddTool(objectTool("y", "Added."), ran)
	awaitChange()
	release()
	web.drop(c)

	tools, err = web.listTools(ctx)
	require.ErrorIs(t, err, errListReplaced, "the old version's list, replaced, is served again: %v", toolNames(tools))
}

// toolNames returns the names and descriptions of tools, for messages.
func toolNames(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name+": "+t.Description)
	}
	return out
}
