package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// mute is an upstream that can be made to forget its sessions and never
// answer an initialize again, as a server that restarted into a hang.
type mute struct {
	h      atomic.Value
	silent atomic.Bool
	// inits counts the initialize requests it left unanswered.
	inits atomic.Int64
}

func muteUpstream(t *testing.T) (*mute, string) {
	t.Helper()
	m := &mute{}
	m.h.Store(echoHandler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.silent.Load() && r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte(`"method":"initialize"`)) {
				m.inits.Add(1)
				<-r.Context().Done()
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		m.h.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// hang makes the upstream forget its sessions and answer no initialize.
func (m *mute) hang() {
	m.silent.Store(true)
	m.h.Store(echoHandler())
}

func echoHandler() http.Handler {
	var echo countingEcho
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, echo.handle)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

// TestMCPUpstreamThatNeverAnswersInitialize: an upstream whose session
// ended and that never answers the initialize of a new one holds no call
// past its own deadline: a call with a 1 s deadline ends in about 1 s while
// another waits for the same connection, the server's other users (the
// list served) do not wait for it, and another server's calls are served.
func TestMCPUpstreamThatNeverAnswersInitialize(t *testing.T) {
	m, upstream := muteUpstream(t)
	other, _ := inProcessUpstream(t)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: {mute: {url: %q}, pay: {url: %q}}
chains: tool: [{use: "audit", trail: "logical"}]
`, upstream, other))), Deps: runtime.Deps{Audit: audit}, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.Equal(t, "ran ping", text(t, res))

	m.hang()
	// The call that finds the session gone.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)

	// A call with no deadline of its own starts connecting again.
	first, cancelFirst := context.WithCancel(ctx)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		_, _ = cs.CallTool(first, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	}()
	defer func() { cancelFirst(); <-firstDone }()
	require.Eventually(t, func() bool { return m.inits.Load() == 1 }, 5*time.Second, 10*time.Millisecond)

	outcomes := func() int {
		n := 0
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "ping" {
				n++
			}
		}
		return n
	}
	before := outcomes()
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = cs.CallTool(dctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.Error(t, err)
	require.Eventually(t, func() bool { return outcomes() == before+1 }, 2*time.Second, 10*time.Millisecond,
		"the proxy ends the call at its deadline, not when the connection gives up")
	assert.Less(t, time.Since(start), 2500*time.Millisecond)

	g := s.srv.acquire()
	served := make(chan bool, 1)
	go func() { served <- g.mcp.tools["ping"].up.serves(g.mcp.tools["ping"]) }()
	select {
	case <-served:
	case <-time.After(time.Second):
		t.Fatal("the server's list waits for the connection")
	}
	g.release()

	start = time.Now()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	assert.Less(t, time.Since(start), time.Second, "another server's calls do not wait")
	assert.EqualValues(t, 1, m.inits.Load(), "one connection is opened at a time")
}

// pagingUpstream serves ping, and its tools/list, once list is set, answers
// the pages list makes of each cursor ("" first) instead.
func pagingUpstream(t *testing.T) (srv *mcp.Server, url string, list *atomic.Value) {
	t.Helper()
	list = &atomic.Value{}
	srv = mcp.NewServer(&mcp.Implementation{Name: "pager", Version: "1"}, nil)
	var echo countingEcho
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, echo.handle)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			pages, _ := list.Load().(func(cursor string) *mcp.ListToolsResult)
			if method != "tools/list" || pages == nil {
				return next(ctx, method, req)
			}
			return pages(req.GetParams().(*mcp.ListToolsParams).Cursor), nil
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return srv, ts.URL, list
}

// tools returns n tools named NAME-i, each described by desc.
func manyTools(name string, n int, desc string) []*mcp.Tool {
	out := make([]*mcp.Tool, n)
	for i := range out {
		out[i] = &mcp.Tool{Name: fmt.Sprintf("%s-%d", name, i), Description: desc, InputSchema: map[string]any{"type": "object"}}
	}
	return out
}

// endlessLists are tool lists an upstream could page without end or past
// the bounds, by the error the load fails with.
var endlessLists = map[string]func(cursor string) *mcp.ListToolsResult{
	`the server's list goes on past 1000 pages, the limit`: func(cursor string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{}, NextCursor: cursor + "x"}
	},
	`the server's list gave cursor "again" again on page 2: it never ends`: func(cursor string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: manyTools("t"+cursor, 1, "A tool."), NextCursor: "again"}
	},
	`the server lists more than 10000 tools, the limit`: func(cursor string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: manyTools("t"+cursor, 1000, "A tool."), NextCursor: cursor + "x"}
	},
	`the server's tool definitions are over the limit of 16777216 bytes`: func(cursor string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: manyTools("t"+cursor, 10, strings.Repeat("d", 100<<10)), NextCursor: cursor + "x"}
	},
}

// TestMCPUpstreamListIsBounded: an upstream whose tools/list pages without
// end, or lists more tools or bytes of definitions than the bounds, fails
// the load naming the server and the limit, as an upstream whose tools
// cannot be listed does; its list taken again (list_changed) so refuses
// its calls until it can be listed.
func TestMCPUpstreamListIsBounded(t *testing.T) {
	for want, pages := range endlessLists {
		t.Run(want, func(t *testing.T) {
			_, upstream, list := pagingUpstream(t)
			list.Store(pages)
			start := time.Now()
			_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1, Logger: slog.New(slog.DiscardHandler), LookupEnv: func(string) (string, bool) { return "", false }})
			require.Error(t, err)
			assert.Equal(t, `mcp server "pager": list tools: `+want, err.Error())
			assert.Less(t, time.Since(start), 10*time.Second)
		})
	}

	srv, upstream, list := pagingUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.Equal(t, "ran ping", text(t, res))

	listAgain(t, s, srv, list, endlessLists[`the server's list gave cursor "again" again on page 2: it never ends`])
	assert.Contains(t, s.logs.String(), `it never ends`)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), `tool "ping" of mcp server "pager" is not served`)
}

// listAgain has the upstream answer tools/list with pages from now on,
// announces a change of its list, and waits until the gateway logs that
// the list could not be taken again.
func listAgain(t *testing.T, s *served, srv *mcp.Server, list *atomic.Value, pages func(cursor string) *mcp.ListToolsResult) {
	t.Helper()
	list.Store(pages)
	srv.AddTool(&mcp.Tool{Name: "other", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	require.Eventually(t, func() bool {
		return strings.Contains(s.logs.String(), "mcp upstream tools could not be listed again")
	}, 5*time.Second, 10*time.Millisecond)
}

// TestMCPHugeToolDefinitionWithheld: a tool whose definition is over the
// limit (a description of a megabyte) is withheld (not listed, its calls
// refused, logged and counted); the server's other tools are served.
func TestMCPHugeToolDefinitionWithheld(t *testing.T) {
	_, upstream, list := pagingUpstream(t)
	list.Store(func(string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{
			{Name: "ping", InputSchema: map[string]any{"type": "object"}},
			{Name: "flood", Description: strings.Repeat("Use this tool. ", 1<<20/15), InputSchema: map[string]any{"type": "object"}},
		}}
	})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	assert.Equal(t, []string{"ping"}, listedTools(t, cs))
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "flood", Arguments: map[string]any{}})
	require.Error(t, err)
	assert.Contains(t, s.logs.String(), "mcp tool withheld: its definition is too large")
	assert.Contains(t, s.logs.String(), "over the limit of 131072")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_mcp_tools_withheld{layer="mcp",server="pager"} 1`)
}

// TestMCPUpstreamErrorsAreAuditedAndMarked: an upstream's JSON-RPC error
// and its error result (isError) are both error results for the client,
// audited failed and counted as errors; a JSON-RPC error saying the request
// was refused before the tool ran (invalid params, method not found) is marked runtime.NotRun, any other error is not. The proxy
// answers ping.
func TestMCPUpstreamErrorsAreAuditedAndMarked(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "failing", Version: "1"}, nil)
	add := func(name string, h mcp.ToolHandler) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, h)
	}
	fail := func(err error) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, err }
	}
	add("invalid", fail(&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount must be positive"}))
	add("nomethod", fail(&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}))
	add("internal", fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the ledger failed midway"}))
	add("iserror", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the ledger failed midway"}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: up: url: %q
chains: tool: [{use: "audit", trail: "logical"}]
`, ts.URL))), Deps: runtime.Deps{Audit: audit}, WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	ctx := context.Background()
	require.NoError(t, cs.Ping(ctx, nil))

	notRun := map[string]bool{"invalid": true, "nomethod": true, "internal": false, "iserror": false}
	g := s.srv.acquire()
	for name, want := range notRun {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		require.NoError(t, err, name)
		assert.True(t, res.IsError, name)
		_, err = g.pl.Tool(ctx, runtime.ToolRequest{Name: name, Args: map[string]any{}})
		require.Error(t, err, name)
		assert.Equal(t, want, runtime.DidNotRun(err), "%s: %v", name, err)
		assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), name)
	}
	g.release()
	failed := map[string]int{}
	for _, r := range audit.Records() {
		if r.Phase == runtime.PhaseOutcome && r.Decision == runtime.DecisionFailed {
			failed[r.Tool]++
		}
	}
	assert.Equal(t, map[string]int{"invalid": 2, "nomethod": 2, "internal": 2, "iserror": 2}, failed)
	require.NoError(t, cs.Close()) // its event stream is a request in flight
	metrics := scrape(t, s.url)
	for name := range notRun {
		assert.Contains(t, metrics, fmt.Sprintf(`agentc_serve_tool_calls_total{outcome="error",tool=%q} 1`, name))
	}
}

// hugeBody is an upstream that answers a request of method with a JSON
// body of size bytes, written as it is read (a tool whose description is
// that long), and passes the others to a server with one tool, ping.
func hugeBody(t *testing.T, method string, size int) (string, *atomic.Int64) {
	t.Helper()
	h := echoHandler()
	var written atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(b, &req) != nil || req.Method != method {
			r.Body = io.NopCloser(bytes.NewReader(b))
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"},"description":"`, req.ID)
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			written.Add(int64(len(chunk)))
		}
		_, _ = io.WriteString(w, `"}]}}`)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, &written
}

// TestMCPUpstreamHugeMessageIsBounded: an upstream answering with a JSON
// body far over any list or result the proxy takes (the SDK reads such a
// body whole, unlike an event stream's events or a stdio line, which it
// bounds) is read no further than maxUpstreamMessageBytes: its list cannot
// be taken and the load fails, naming the limit, without the body held in
// memory.
func TestMCPUpstreamHugeMessageIsBounded(t *testing.T) {
	url, written := hugeBody(t, "tools/list", 64<<20)
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: huge: url: %q
`, url))), WatchInterval: -1, Logger: slog.New(slog.DiscardHandler), LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `mcp server "huge": list tools: `)
	assert.Contains(t, err.Error(), fmt.Sprintf("over the limit of %d bytes", maxUpstreamMessageBytes))
	assert.Less(t, written.Load(), int64(48<<20), "the proxy stopped reading the body")
}

// TestMCPInvalidInputSchemaWithheld: a tool whose input schema is not a
// JSON Schema (a type that is a number) is withheld as a poisoned one is
// (not listed, its calls refused, logged and counted), where it failed
// the whole load; the server's other tools are served.
func TestMCPInvalidInputSchemaWithheld(t *testing.T) {
	_, upstream, list := pagingUpstream(t)
	list.Store(func(string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{
			{Name: "ping", InputSchema: map[string]any{"type": "object"}},
			{Name: "broken", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 12}}}},
		}}
	})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	assert.Equal(t, []string{"ping"}, listedTools(t, cs))
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "broken", Arguments: map[string]any{"a": 1}})
	require.ErrorContains(t, err, `unknown tool "broken"`)
	old := s.srv.acquire()
	defer old.release()
	_, err = old.pl.Tool(context.Background(), runtime.ToolRequest{Name: "broken", Args: map[string]any{"a": 1}})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, LayerMCP, b.Layer)
	assert.Contains(t, s.logs.String(), "mcp tool withheld: its input schema is not a valid JSON Schema")
	assert.Contains(t, s.logs.String(), "/properties/a/type")
	_, _, metrics := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Contains(t, metrics, `agentc_serve_mcp_tools_withheld{layer="mcp",server="pager"} 1`)
}

// TestMCPBodyOverTheLimitIsAJSONRPCError: a POST /mcp the gateway refused
// for its body (over MaxBodyBytes, over the bytes or calls in flight) was
// answered with the chat routes' error body, which an MCP client cannot
// read: the go-sdk client took a 413 without a JSON-RPC error for a broken
// connection and failed every later call of the session. The refusal is a
// JSON-RPC error response to the request's id, with the same status: the
// client reports the call's error and the session goes on.
func TestMCPBodyOverTheLimitIsAJSONRPCError(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), upstream))),
		MaxBodyBytes: 8 << 10})
	cs := connectProxy(t, s.url, "agent-key", nil)
	ctx := context.Background()

	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": strings.Repeat("a", 16<<10)}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "request body is over the limit of 8192 bytes")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err, "the session goes on")
	assert.False(t, res.IsError, text(t, res))

	hdr := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	big := `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"lookup","arguments":{"order_id":"` + strings.Repeat("a", 16<<10) + `"}}}`
	code, _, body := do(t, "POST", s.url+"/mcp", "agent-key", []byte(big), hdr...)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"call-7","error":{"code":-32600,"message":"request body is over the limit of 8192 bytes",
		"data":{"status":413,"code":"body_too_large"}}}`, body)

	// Chunked: the id is read from what arrived before the limit.
	req, err := http.NewRequest("POST", s.url+"/mcp", io.MultiReader(strings.NewReader(strings.Replace(big, `"call-7"`, `12`, 1))))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer agent-key")
	for i := 0; i < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, string(b), `"id":12,`)

	// Without a key the refusal has the request's format too (its id is
	// not read: the body of a caller not admitted is not).
	code, _, body = do(t, "POST", s.url+"/mcp", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), hdr...)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, `"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"missing API key`)
}

func TestRequestID(t *testing.T) {
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`:                       `5`,
		`{"method":"tools/call","params":{"a":[1,{"id":9}]},"id":"x-1"}`: `"x-1"`,
		` {"id": -3.5}`:  `-3.5`,
		`{"id":null}`:    ``,
		`{"id":{"a":1}}`: ``,
		`{"method":"tools/call","params":{"a":"aaaaaaa`: ``,
		`[{"id":1}]`: ``,
		``:           ``,
		`{"id"`:      ``,
	} {
		assert.Equal(t, want, string(requestID(strings.NewReader(body))), body)
	}
}

// TestMCPUpstreamListsAToolTwice: an upstream whose tools/list gives one
// name twice (two definitions of which a call would run one) failed the
// load saying the tool "is served by both "pager" and "pager"; give one of
// them a prefix", which no prefix fixes. The load fails naming the server
// and the tool, and so does the log of a list taken again.
func TestMCPUpstreamListsAToolTwice(t *testing.T) {
	twice := func(string) *mcp.ListToolsResult {
		return &mcp.ListToolsResult{Tools: []*mcp.Tool{
			{Name: "ping", Description: "Ping.", InputSchema: map[string]any{"type": "object"}},
			{Name: "lookup", InputSchema: map[string]any{"type": "object"}},
			{Name: "ping", Description: "Ping, then refund.", InputSchema: map[string]any{"type": "object"}},
		}}
	}
	_, upstream, list := pagingUpstream(t)
	list.Store(twice)
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1, Logger: slog.New(slog.DiscardHandler), LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Equal(t, `mcp server "pager": list tools: the server lists tool "ping" twice: a call names its tool by name, so which of the two definitions it would run cannot be told`, err.Error())

	srv, upstream, list := pagingUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pager: url: %q
`, upstream))), WatchInterval: -1})
	listAgain(t, s, srv, list, twice)
	assert.Contains(t, s.logs.String(), `server=pager error="the server lists tool \"ping\" twice`)
}
