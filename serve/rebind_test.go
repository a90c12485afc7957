package serve

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// rebindGateway serves a keyless policy (or one with the key clientKey)
// with a model and a host tool that count their calls.
type rebindGateway struct {
	*served
	calls *atomic.Int64
}

func newRebindGateway(t *testing.T, keyed bool, allow ...string) rebindGateway {
	var calls atomic.Int64
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		calls.Add(1)
		yield(runtime.Delta{Text: "ok"})
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
		return nil
	})
	policy := "package gw\nmodels: m: {}\ntools: ping: {description: \"Ping.\"}\n"
	if keyed {
		policy += `keys: app: {sha256: "` + sha(clientKey) + `"}` + "\n"
	}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1, AllowHosts: allow,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"m": model}, nil
		},
		Tools: map[string]runtime.ToolFunc{"ping": func(context.Context, *runtime.ToolCall) (any, error) {
			calls.Add(1)
			return "pong", nil
		}}})
	return rebindGateway{served: s, calls: &calls}
}

// The requests of a page whose name was re-pointed at the gateway: same
// origin as far as the browser knows (Origin and Host name the page).
var rebindRequests = []struct {
	method, path, body string
	header             []string
}{
	{"POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil},
	{"POST", "/v1/messages", `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, []string{"anthropic-version", "2023-06-01"}},
	{"POST", "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, []string{"anthropic-version", "2023-06-01"}},
	{"POST", "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ping","arguments":{}}}`, []string{"Accept", "application/json, text/event-stream"}},
	{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`, []string{"Accept", "application/json, text/event-stream"}},
	{"GET", "/v1/models", "", nil},
	{"GET", "/metrics", "", nil},
}

// sendAs sends a request to base with host as its Host header (and as the
// Origin of a same-origin page), with the key when set.
func sendAs(t *testing.T, base, host, key, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Host = host
	req.Header.Set("Origin", "http://"+host)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	code, _, b := roundTrip(t, req)
	return code, b
}

// TestRebindingPageIsRefused: a page at http://evil.example:8080 whose name
// its owner re-pointed at 127.0.0.1 is same-origin to the browser (Origin
// and Host both evil.example:8080), which passes the cross-origin check.
// On a gateway listening on loopback, every route that spends, acts or
// tells is refused with a 421 in its client's error format (a JSON-RPC
// error on POST /mcp) before any model or tool is called; the health
// probes, which do and tell nothing, answer.
func TestRebindingPageIsRefused(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		g := newRebindGateway(t, keyed)
		key := ""
		if keyed {
			key = clientKey
		}
		for _, rq := range rebindRequests {
			code, body := sendAs(t, g.url, "evil.example:8080", key, rq.method, rq.path, rq.body, rq.header...)
			assert.Equal(t, http.StatusMisdirectedRequest, code, "%s %s keyed=%v: %s", rq.method, rq.path, keyed, body)
			assert.Contains(t, body, `"code":"foreign_host"`, rq.path)
			assert.Contains(t, body, `evil.example`, rq.path)
			switch {
			case rq.method == "POST" && rq.path == "/mcp":
				var e struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct{ Code int64 }
				}
				require.NoError(t, json.Unmarshal([]byte(body), &e), body)
				assert.Equal(t, "2.0", e.JSONRPC)
				assert.Equal(t, int64(-32600), e.Error.Code, body)
			case strings.HasPrefix(rq.path, "/v1/messages"):
				assert.Contains(t, body, `"type":"error"`, "Anthropic's error body")
			default:
				assert.Contains(t, body, `"error":{"message"`, "OpenAI's error body")
			}
		}
		assert.Zero(t, g.calls.Load(), "no model or tool was called")
		for _, path := range []string{"/healthz", "/readyz"} {
			code, body := sendAs(t, g.url, "evil.example:8080", "", "GET", path, "")
			assert.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		}
	}
}

// TestLoopbackAndAllowedHostsAreServed: localhost, a loopback address with
// or without its port, and a name given in AllowHosts are served on every
// route, MCP's included (the MCP handler's own check, which knows no
// allowed names, does not refuse them).
func TestLoopbackAndAllowedHostsAreServed(t *testing.T) {
	g := newRebindGateway(t, false, "gw.internal.example")
	port := g.url[strings.LastIndex(g.url, ":")+1:]
	for _, host := range []string{"localhost:" + port, "localhost", "127.0.0.1:" + port, "127.0.0.2", "[::1]:" + port, "GW.internal.example:" + port, "gw.internal.example"} {
		for _, rq := range rebindRequests {
			code, body := sendAs(t, g.url, host, "", rq.method, rq.path, rq.body, rq.header...)
			if rq.path == "/mcp" && strings.Contains(rq.body, "tools/call") {
				// Outside a session: refused by the MCP server, not the gateway.
				assert.NotContains(t, body, "foreign_host", host)
				continue
			}
			assert.Equal(t, http.StatusOK, code, "%s %s as %s: %s", rq.method, rq.path, host, body)
		}
	}
	assert.EqualValues(t, 7*2, g.calls.Load(), "each host's chat and messages reached the model")

	code, body := sendAs(t, g.url, "gw.internal.example.evil.example", "", "POST", "/v1/chat/completions", rebindRequests[0].body)
	assert.Equal(t, http.StatusMisdirectedRequest, code, body)
	code, body = sendAs(t, g.url, "localhost.evil.example", "", "POST", "/v1/chat/completions", rebindRequests[0].body)
	assert.Equal(t, http.StatusMisdirectedRequest, code, body)
}

// serveFrom serves r on s as a connection that arrived at local.
func serveFrom(s *Server, local string, r *http.Request) *httptest.ResponseRecorder {
	addr, _ := net.ResolveTCPAddr("tcp", local)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(addr)))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// TestHostCheckOffLoopback: on an address other than loopback, a keyless
// gateway still refuses a name it was not given (a page re-pointed at the
// gateway's address on the network, from any browser there), and serves an
// IP address, which no page's name can be; a gateway with keys serves any
// Host, the page having no key to send.
func TestHostCheckOffLoopback(t *testing.T) {
	chat := rebindRequests[0].body
	req := func(host string) *http.Request {
		r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chat))
		r.Host = host
		r.Header.Set("Authorization", "Bearer "+clientKey)
		return r
	}
	keyless := newRebindGateway(t, false, "gw.internal.example")
	w := serveFrom(keyless.srv, "10.0.0.5:8080", req("evil.example:8080"))
	assert.Equal(t, http.StatusMisdirectedRequest, w.Code, w.Body.String())
	for _, host := range []string{"10.0.0.5:8080", "10.0.0.5", "[fd00::5]:8080", "gw.internal.example:8080"} {
		w = serveFrom(keyless.srv, "10.0.0.5:8080", req(host))
		assert.Equal(t, http.StatusOK, w.Code, "%s: %s", host, w.Body.String())
	}
	assert.EqualValues(t, 4, keyless.calls.Load())

	keyed := newRebindGateway(t, true)
	w = serveFrom(keyed.srv, "10.0.0.5:8080", req("gateway.bank.example"))
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.EqualValues(t, 1, keyed.calls.Load())
}

// TestAllowHostsAreNames: an allowed host is a name, without a port or a
// scheme; anything else fails New rather than never matching.
func TestAllowHostsAreNames(t *testing.T) {
	src := cueSource(writePolicy(t, "package gw\nmodels: m: {}\n"))
	for _, bad := range []string{"", "gw.example:8080", "http://gw.example", "gw example", "gw.example/"} {
		_, err := New(context.Background(), Options{Source: src, WatchInterval: -1, AllowHosts: []string{bad}})
		require.Error(t, err, "%q", bad)
		assert.Contains(t, err.Error(), "AllowHosts")
	}
}

// TestLoopbackAddr: one reading of a loopback address serves the Host
// check (the listener's address), the metrics' guard (the caller's) and
// agentc serve's -listen: an IPv4-mapped loopback address and one with a
// zone are loopback, a link-local address with the same zone is not.
func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:1": true, "[::1]:8080": true, "localhost:8080": true, "LOCALHOST:1": true,
		"[::ffff:127.0.0.1]:8080": true, "[::1%lo]:8080": true, "[::ffff:127.0.0.1%lo]:8080": true,
		"[fe80::1%lo]:8080": false, "[::ffff:10.0.0.1]:8080": false, ":8080": false, "0.0.0.0:8080": false,
		"[::]:8080": false, "10.0.0.5:8080": false, "gw.example:8080": false, "127.0.0.1": false, "bad": false, "": false,
	} {
		assert.Equal(t, want, LoopbackAddr(addr), addr)
	}
}
