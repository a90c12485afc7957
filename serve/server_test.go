package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

const keysPolicy = `package gw

models: primary: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
keys: {
	alice: {sha256: "%s"}
	bob: {env: "BOB_KEY", tenant: "team-b"}
}
`

func TestOperationalEndpoints(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("alice-key")))),
		LookupEnv: func(k string) (string, bool) { return map[string]string{"BOB_KEY": "bob-key"}[k], k == "BOB_KEY" }})

	code, _, body := do(t, "GET", s.url+"/healthz", "", nil)
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)
	code, _, body = do(t, "GET", s.url+"/readyz", "", nil)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "policy gw, generation 1")

	code, _, body = do(t, "GET", s.url+"/v1/models", "alice-key", nil)
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"id":"primary"`)

	code, _, body = do(t, "GET", s.url+"/no/such/route", "", nil)
	assert.Equal(t, 404, code)
	assert.Contains(t, body, `"type":"not_found_error"`)

	body = scrape(t, s.url)
	assert.Contains(t, body, `agentc_serve_requests_total{code="200",model="-",route="models"} 1`)
	assert.Contains(t, body, `agentc_serve_reloads_total{result="failed"} 0`)
	assert.Contains(t, body, `agentc_serve_request_duration_seconds_bucket{model="-",route="models"`)
	assert.Contains(t, s.logs.String(), "route=models status=200")
}

// With MetricsElsewhere the metrics, which name tenants and their spend,
// are not on the callers' listener; OpsHandler serves them, with the health
// endpoints, on a listener of their own.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("alice-key")))),
		LookupEnv:        func(k string) (string, bool) { return map[string]string{"BOB_KEY": "bob-key"}[k], k == "BOB_KEY" },
		MetricsElsewhere: true})
	code, _, body := do(t, "GET", s.url+"/metrics", "", nil)
	assert.Equal(t, 404, code, "the callers' listener does not serve the metrics")
	assert.NotContains(t, body, "agentc_serve")
	code, _, _ = do(t, "GET", s.url+"/metrics", "alice-key", nil)
	assert.Equal(t, 404, code, "not with a caller's key either")
	code, _, _ = do(t, "GET", s.url+"/v1/models", "alice-key", nil)
	require.Equal(t, 200, code)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ops := &http.Server{Handler: s.srv.OpsHandler(), ReadHeaderTimeout: time.Second}
	go func() { _ = ops.Serve(ln) }()
	t.Cleanup(func() { _ = ops.Close() })
	base := "http://" + ln.Addr().String()
	body = scrape(t, base)
	assert.Contains(t, body, `agentc_serve_requests_total{code="200",model="-",route="models"} 1`)
	code, _, body = do(t, "GET", base+"/healthz", "", nil)
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\n", body)
	code, _, body = do(t, "GET", base+"/readyz", "", nil)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "generation 1")
	code, _, _ = do(t, "GET", base+"/v1/models", "alice-key", nil)
	assert.Equal(t, 404, code, "the ops listener serves no API route")
}

func TestVirtualKeys(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("alice-key")))),
		LookupEnv: func(k string) (string, bool) { return map[string]string{"BOB_KEY": "bob-key"}[k], k == "BOB_KEY" }})

	tests := []struct {
		name   string
		header []string
		want   int
		body   string
	}{
		{"no key", nil, 401, "missing API key"},
		{"unknown key", []string{"Authorization", "Bearer mallory"}, 401, "unknown API key"},
		{"hashed key", []string{"Authorization", "Bearer alice-key"}, 200, `"object":"list"`},
		{"key from the environment", []string{"Authorization", "bearer bob-key"}, 200, `"object":"list"`},
		{"anthropic header", []string{"x-api-key", "bob-key"}, 200, `"object":"list"`},
		{"a key's hash is not a key", []string{"Authorization", "Bearer " + sha("alice-key")}, 401, "unknown API key"},
		{"scheme in capitals, spaces around the key", []string{"Authorization", "BEARER   bob-key  "}, 200, `"object":"list"`},
		{"no space after the scheme", []string{"Authorization", "Bearerbob-key"}, 401, "does not use the Bearer scheme"},
		{"another scheme", []string{"Authorization", "Basic Ym9iLWtleQ=="}, 401, "does not use the Bearer scheme"},
		{"the same key in both headers", []string{"Authorization", "Bearer bob-key", "x-api-key", "bob-key"}, 200, `"object":"list"`},
		// Which key the caller meant is not the gateway's to guess, nor
		// is one key to win over the other whatever it is.
		{"a good x-api-key and another bearer", []string{"Authorization", "Bearer mallory", "x-api-key", "bob-key"}, 401, "conflicting API keys"},
		{"two good keys", []string{"Authorization", "Bearer alice-key", "x-api-key", "bob-key"}, 401, "conflicting API keys"},
		// Azure-style clients send their key in api-key: a key like the
		// others, refused beside another that differs.
		{"azure header", []string{"api-key", "bob-key"}, 200, `"object":"list"`},
		{"azure header unknown", []string{"api-key", "mallory"}, 401, "unknown API key"},
		{"azure header and the same bearer", []string{"api-key", "bob-key", "Authorization", "Bearer bob-key"}, 200, `"object":"list"`},
		{"an unknown azure header beside a good bearer", []string{"api-key", "mallory", "Authorization", "Bearer bob-key"}, 401, "conflicting API keys"},
		{"an unknown azure header beside a good x-api-key", []string{"api-key", "mallory", "x-api-key", "alice-key"}, 401, "conflicting API keys"},
		{"two good keys, one in the azure header", []string{"api-key", "alice-key", "x-api-key", "bob-key"}, 401, "conflicting API keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, h, body := do(t, "GET", s.url+"/v1/models", "", nil, tt.header...)
			assert.Equal(t, tt.want, code, body)
			assert.Contains(t, body, tt.body)
			if tt.want == 401 {
				assert.NotEmpty(t, h.Get("WWW-Authenticate"))
				assert.NotContains(t, body, "mallory", "a presented key is never echoed")
			}
		})
	}
	assert.Contains(t, s.logs.String(), "tenant=team-b")

	// A header repeated: the first value is not to win over the others.
	for _, tt := range []struct {
		name, header string
		values       []string
		want         int
	}{
		{"two bearer tokens", "Authorization", []string{"Bearer bob-key", "Bearer mallory"}, 401},
		{"two x-api-keys", "x-api-key", []string{"bob-key", "mallory"}, 401},
		{"one key twice", "x-api-key", []string{"bob-key", "bob-key"}, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", s.url+"/v1/models", nil)
			require.NoError(t, err)
			for _, v := range tt.values {
				req.Header.Add(tt.header, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tt.want, resp.StatusCode, string(b))
			assert.NotContains(t, string(b), "mallory")
		})
	}
}

func TestKeyFromAnUnsetVariableFailsTheLoad(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, fmt.Sprintf(keysPolicy, sha("k")))),
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "environment variable BOB_KEY is not set")
}

// A first start without the variables the policy names (the callers' keys,
// the providers' keys) names all of them at once.
func TestUnsetVariablesAreNamedTogether(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, `package gw

models: primary: {provider: "openai", model: "m", api_key_env: "AGENTC_TEST_SERVE_UNSET_OPENAI"}
keys: app: {env: "AGENTC_TEST_SERVE_UNSET_APP"}
`)), LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "environment variable AGENTC_TEST_SERVE_UNSET_APP is not set")
	assert.Contains(t, err.Error(), "environment variable AGENTC_TEST_SERVE_UNSET_OPENAI (its api_key_env) is not set")
}

// The stores' url_env and the MCP servers' headers are named with them,
// rather than in a later start once those are set.
func TestUnsetStoreAndHeaderVariablesAreNamedTogether(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, `package gw

models: primary: {provider: "openai", model: "m", api_key_env: "AGENTC_TEST_SERVE_UNSET_OPENAI"}
keys: app: {env: "AGENTC_TEST_SERVE_UNSET_APP"}
stores: {
	shared: {kind: "redis", url_env: "AGENTC_TEST_SERVE_UNSET_REDIS"}
	ledger: {kind: "postgres", url_env: "AGENTC_TEST_SERVE_UNSET_PG"}
	runs: {kind: "postgres", url_env: "AGENTC_TEST_SERVE_UNSET_RUNS"}
}
mcp: servers: pay: {url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer ${AGENTC_TEST_SERVE_UNSET_PAY}"}}
chains: chat: [{use: "meter", store: "shared"}, {use: "rate_limit", rate: 5, per: "1m", store: "ledger"}]
chains: turn: [{use: "checkpoint", store: "runs"}]
settings: digest_key_env: "AGENTC_TEST_SERVE_UNSET_DIGEST"
`)), LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	for _, want := range []string{
		"settings.digest_key_env: environment variable AGENTC_TEST_SERVE_UNSET_DIGEST is not set",
		"environment variable AGENTC_TEST_SERVE_UNSET_APP is not set",
		"environment variable AGENTC_TEST_SERVE_UNSET_OPENAI (its api_key_env) is not set",
		"build stores.ledger: environment variable AGENTC_TEST_SERVE_UNSET_PG (its url_env) is not set",
		"build stores.shared: environment variable AGENTC_TEST_SERVE_UNSET_REDIS (its url_env) is not set",
		`mcp server "pay": header Authorization: environment variable AGENTC_TEST_SERVE_UNSET_PAY is not set`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), "AGENTC_TEST_SERVE_UNSET_RUNS", "the gateway runs no turn: the checkpoint's store is never opened")
}

// A store's variable alone fails the start, before any MCP server is
// reached, named as runtime.Build names it; a store only the turn chain
// opens, which the gateway drops, is not read.
func TestAnUnsetStoreVariableAloneFailsTheStart(t *testing.T) {
	dir := writePolicy(t, `package gw

models: m: {}
stores: {
	shared: {kind: "redis", url_env: "AGENTC_TEST_SERVE_UNSET_REDIS"}
	runs: {kind: "postgres", url_env: "AGENTC_TEST_SERVE_UNSET_RUNS"}
}
chains: chat: [{use: "rate_limit", rate: 5, per: "1m", store: "shared"}]
chains: turn: [{use: "checkpoint", store: "runs"}]
`)
	_, err := New(context.Background(), Options{Source: cueSource(dir)})
	require.EqualError(t, err, "build stores.shared: environment variable AGENTC_TEST_SERVE_UNSET_REDIS (its url_env) is not set")
}

// A digest key the policy asks for, unset or too short, fails the start
// naming its variable and never its value: the gateway never stores plain
// digests in its place.
func TestAnUnsetDigestKeyFailsTheStart(t *testing.T) {
	src := cueSource(writePolicy(t, "package gw\nmodels: m: {}\nsettings: digest_key_env: \"AGENTC_TEST_SERVE_DIGEST_KEY\"\n"))
	t.Setenv("AGENTC_TEST_SERVE_DIGEST_KEY", "")
	_, err := New(context.Background(), Options{Source: src})
	require.ErrorContains(t, err, "settings.digest_key_env: environment variable AGENTC_TEST_SERVE_DIGEST_KEY is not set")
	t.Setenv("AGENTC_TEST_SERVE_DIGEST_KEY", "too-short-secret")
	_, err = New(context.Background(), Options{Source: src})
	require.ErrorContains(t, err, "environment variable AGENTC_TEST_SERVE_DIGEST_KEY: a digest key needs at least 32 bytes")
	assert.NotContains(t, err.Error(), "too-short-secret")
	t.Setenv("AGENTC_TEST_SERVE_DIGEST_KEY", "serve-test-digest-key-0123456789abcdef")
	s := startServer(t, Options{Source: src})
	code, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
	assert.Equal(t, 200, code, body)
}

func TestNoKeysAdmitsEveryCaller(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n"))})
	code, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
	assert.Equal(t, 200, code, body)
}

func TestBodyLimitAndSlowClients(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")),
		MaxBodyBytes: 1 << 10, ReadHeaderTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond})

	// Over the limit with a Content-Length: refused before reading.
	code, _, body := do(t, "POST", s.url+"/mcp", "", make([]byte, 2<<10), "Content-Type", "application/json")
	assert.Equal(t, 413, code, body)
	assert.Contains(t, body, "over the limit of 1024 bytes")

	// Slow headers: the connection is closed once ReadHeaderTimeout passed.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	assert.Error(t, err, "the server closes a connection whose headers do not arrive; read %q", buf[:n])
	assert.Less(t, time.Since(start), 3*time.Second)
}

func TestReloadOnFileChange(t *testing.T) {
	dir := writePolicy(t, "package gw\nmodels: one: {}\n")
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: 20 * time.Millisecond})
	old := s.srv.cur.Load()

	// A broken policy: the reload fails and the old pipeline keeps serving.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: one: {usd_per_mtok_in: -1}\n"), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(s.logs.String(), "reload failed") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, s.logs.String(), "usd_per_mtok_in")
	assert.Contains(t, s.logs.String(), "files=["+filepath.Join(dir, "policy.cue")+"]", "the failure names the files")
	assert.Same(t, old, s.srv.cur.Load())
	code, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `"id":"one"`)

	// A good policy: swapped in; the old generation is closed (no request
	// holds it).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: two: {}\n"), 0o644))
	require.Eventually(t, func() bool { return s.srv.cur.Load() != old }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-old.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced generation was not closed")
	}
	_, _, body = do(t, "GET", s.url+"/v1/models", "", nil)
	assert.Contains(t, body, `"id":"two"`)
	metrics := scrape(t, s.url)
	assert.Contains(t, metrics, `agentc_serve_reloads_total{result="ok"} 1`)
	assert.Contains(t, metrics, `agentc_serve_reloads_total{result="failed"} 1`)
	assert.Contains(t, metrics, `agentc_serve_policy_generation 2`)
	// Its help says what else counts, as docs/serve.md does.
	assert.Contains(t, metrics, "# HELP agentc_serve_policy_generation The number of the policy generation being served (1 at start, +1 per successful reload and per change of an upstream MCP server's tool list).")

	// A file added to the policy directory is seen too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "more.cue"), []byte("package gw\nmodels: three: {}\n"), 0o644))
	require.Eventually(t, func() bool {
		_, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
		return strings.Contains(body, `"id":"three"`)
	}, 5*time.Second, 20*time.Millisecond)
}

// TestRetiredGenerationWaitsForItsRequests: a request holding the old
// generation finishes on it; the generation closes after it.
func TestRetiredGenerationWaitsForItsRequests(t *testing.T) {
	n := 0
	src := SourceFunc(func(context.Context) (*Loaded, error) {
		n++
		return &Loaded{Plan: &plan.Plan{Version: plan.Version, Policy: fmt.Sprintf("p%d", n)}}, nil
	})
	srv, err := New(context.Background(), Options{Source: src, WatchInterval: -1})
	require.NoError(t, err)
	held := srv.acquire()
	require.NoError(t, srv.Reload(context.Background()))
	assert.Equal(t, "p2", srv.cur.Load().plan.Policy)
	select {
	case <-held.done:
		t.Fatal("a generation in use was closed")
	default:
	}
	held.release()
	<-held.done
	require.NoError(t, srv.Close())
}

func TestGracefulShutdown(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")), ShutdownTimeout: 5 * time.Second})
	// A request in flight when shutdown starts still completes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n{"))
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	time.Sleep(50 * time.Millisecond)
	code, _, _ := func() (int, http.Header, string) {
		req, _ := http.NewRequest("GET", s.url+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, ""
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil, ""
	}()
	assert.NotEqual(t, 200, code, "a server shutting down is not ready (or no longer accepts)")
	_, err = conn.Write([]byte("}"))
	require.NoError(t, err)
	buf := make([]byte, 4096)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	nr, _ := conn.Read(buf)
	assert.Contains(t, string(buf[:nr]), "HTTP/1.1 ", "the request in flight is answered")
	select {
	case err := <-stopped:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestShutdownWithMCPSessionsOpen: an MCP client's open session (its
// standalone event stream, which carries no call) does not hold the
// shutdown for its whole grace period, while a tool call in flight still
// finishes and gets its answer.
func TestShutdownWithMCPSessionsOpen(t *testing.T) {
	policy := `package gw

tools: slow: {description: "Answers when released.", args: {type: "object"}}
`
	started, release := make(chan struct{}), make(chan struct{})
	// The grace is long, and the bound a shutdown must beat half of it, so a
	// busy machine's slowness is not read as sessions holding the shutdown.
	const grace = 10 * time.Second
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1, ShutdownTimeout: grace,
		Tools: map[string]runtime.ToolFunc{"slow": func(context.Context, *runtime.ToolCall) (any, error) {
			close(started)
			<-release
			return "done", nil
		}}})
	idle := connectProxy(t, s.url, "", nil)
	// A client with the SDK's default reconnection (a second before it
	// opens its stream again), as clients run.
	busy, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, nil)
	require.NoError(t, err)
	defer busy.Close()
	_, err = UpstreamTools(context.Background(), idle)
	require.NoError(t, err)
	called := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := busy.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		assert.NoError(t, err)
		called <- res
	}()
	<-started
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	require.Eventually(t, func() bool { return !s.srv.ready.Load() }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	close(release)
	res := <-called
	require.NotNil(t, res)
	assert.False(t, res.IsError, "the call in flight finishes")
	require.NoError(t, <-stopped)
	assert.Less(t, time.Since(start), grace/2, "the open sessions did not hold the shutdown")
	assert.NotContains(t, s.logs.String(), "shutdown deadline passed")
}

// TestShutdownDeadlineHoldsAgainstACallIgnoringItsCancellation: a call that
// goes on after the shutdown's cut (a host tool that ignores its context)
// does not keep Serve from returning, and so the process from exiting,
// long past its grace period.
func TestShutdownDeadlineHoldsAgainstACallIgnoringItsCancellation(t *testing.T) {
	policy := `package gw

tools: stuck: {description: "Ignores its cancellation.", args: {type: "object"}}
`
	started, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1, ShutdownTimeout: 300 * time.Millisecond,
		Tools: map[string]runtime.ToolFunc{"stuck": func(context.Context, *runtime.ToolCall) (any, error) {
			close(started)
			<-release
			return "late", nil
		}}})
	cs := connectProxy(t, s.url, "", nil)
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stuck", Arguments: map[string]any{}})
	}()
	<-started
	start := time.Now()
	require.NoError(t, s.stop())
	assert.Less(t, time.Since(start), 300*time.Millisecond+cutWait+time.Second, "Serve returned soon after the cut")
	logs := s.logs.String()
	assert.Contains(t, logs, "requests still running after the shutdown cut")
	// The line said waited=1s, the wait after the cut alone, which read as
	// the whole shutdown's; it names the requests, the grace they had and
	// the time since the cut.
	assert.Contains(t, logs, "running=1 grace=300ms since_cut=1")
	assert.NotContains(t, logs, "waited=")
}

// TestTenantsNeverShareARun: a tenant whose name holds a slash and another
// naming a run that spells the rest of it still get two runs, so one never
// reads the other's cached answers or spends its budget.
func TestTenantsNeverShareARun(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	txt := transcript(t, "openai", "text.sse")
	up := newUpstream(t, reply{body: txt}, reply{body: txt})
	policy := fmt.Sprintf(`package gw

models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "%s/v1", api_key_env: "AGENTC_TEST_OPENAI_KEY"}
keys: {
	retail: {sha256: "%s", tenant: "bank/retail"}
	bank: {sha256: "%s", tenant: "bank"}
}
chains: chat: [{use: "memoize", scope: "run", ttl: "1h"}]
`, up.URL, sha("retail-key"), sha("bank-key"))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1})

	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "retail-key", chatBody("primary", "balance of account 42", false), RunHeader, "r1")
	require.Equal(t, 200, code, body)
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", "bank-key", chatBody("primary", "balance of account 42", false), RunHeader, "retail/r1")
	require.Equal(t, 200, code, body)
	assert.Equal(t, 2, up.requests(), "the second tenant's call is not served from the first tenant's cache")
	assert.Contains(t, s.logs.String(), "run=bank%2Fretail/r1")
	assert.Contains(t, s.logs.String(), "run=bank/retail/r1")
}

// TestNamedRunsAreBoundedPerTenant: a client naming a new run on every
// request does not have the layers keep state for each until it goes idle:
// past MaxRuns its tenant's runs idle the longest are ended (a run's
// ledger is forgotten), and another tenant's runs are left alone.
func TestNamedRunsAreBoundedPerTenant(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	txt := transcript(t, "openai", "text.sse")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(txt))
	}))
	defer up.Close()
	policy := fmt.Sprintf(`package gw

models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "%s/v1", api_key_env: "AGENTC_TEST_OPENAI_KEY"}
keys: {
	flood: {sha256: "%s"}
	steady: {sha256: "%s"}
}
chains: chat: [{use: "meter", budget: calls: 1}]
`, up.URL, sha("flood-key"), sha("steady-key"))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1, MaxRuns: 16})
	call := func(key, run string) int {
		code, _, _ := do(t, "POST", s.url+"/v1/chat/completions", key, chatBody("primary", "hi", false), RunHeader, run)
		return code
	}
	require.Equal(t, 200, call("steady-key", "r0"))
	require.Equal(t, 402, call("steady-key", "r0"), "the run's ledger holds its call")
	require.Equal(t, 200, call("flood-key", "r0"))
	for i := range 200 {
		require.Equal(t, 200, call("flood-key", fmt.Sprintf("r%d", i+1)))
	}
	s.srv.runs.mu.Lock()
	kept, steady := len(s.srv.runs.byTenant["flood"]), len(s.srv.runs.byTenant["steady"])
	s.srv.runs.mu.Unlock()
	assert.LessOrEqual(t, kept, 16, "the flooding tenant keeps at most MaxRuns runs")
	assert.Equal(t, 1, steady)
	assert.Equal(t, 200, call("flood-key", "r0"), "the flooding tenant's oldest run was ended: its ledger is gone")
	assert.Equal(t, 402, call("steady-key", "r0"), "another tenant's run keeps its state")
}

// TestMemoizeScopeKeyIsPerTenant: a cache with scope "key" serves a tenant's
// second request, in another run, from its cache, and never serves another
// tenant from it.
func TestMemoizeScopeKeyIsPerTenant(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	txt := transcript(t, "openai", "text.sse")
	up := newUpstream(t, reply{body: txt}, reply{body: txt}, reply{body: txt})
	policy := fmt.Sprintf(`package gw

models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "%s/v1", api_key_env: "AGENTC_TEST_OPENAI_KEY"}
keys: {
	retail: {sha256: "%s", tenant: "retail"}
	treasury: {sha256: "%s", tenant: "treasury"}
}
chains: chat: [{use: "memoize", scope: "key", ttl: "1h"}]
`, up.URL, sha("retail-key"), sha("treasury-key"))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1})

	ask := func(key string) {
		t.Helper()
		code, _, body := do(t, "POST", s.url+"/v1/chat/completions", key, chatBody("primary", "balance of account 42", false))
		require.Equal(t, 200, code, body)
	}
	ask("retail-key")
	ask("retail-key")
	assert.Equal(t, 1, up.requests(), "the tenant's second request, a run of its own, is served from its cache")
	ask("treasury-key")
	assert.Equal(t, 2, up.requests(), "another tenant is never served from the first tenant's cache")
}

// TestReloadKeepsBudgetsRateLimitsAndIdempotency: a reload builds a new
// pipeline, but not a new process state: a spent budget stays spent, a
// rate limit stays consumed, and a side-effecting call that ran does not run
// again under the same idempotency key.
func TestReloadKeepsBudgetsRateLimitsAndIdempotency(t *testing.T) {
	txt := transcript(t, "openai", "text.sse")
	g := newGateway(t, `{use: "meter", name: "spend", scope: "global", budget: calls: 1}`, []reply{{body: txt}, {body: txt}}, nil)
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	require.Equal(t, 200, code, body)
	require.NoError(t, g.srv.Reload(context.Background()))
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", true))
	assert.Equal(t, 402, code, body)
	assert.Equal(t, 1, g.oa.requests(), "the budget spent before the reload is still spent")

	g = newGateway(t, `{use: "rate_limit", name: "per_key", rate: 1, per: "1h", mode: "reject", scope: "key"}`, []reply{{body: txt}, {body: txt}}, nil)
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	require.Equal(t, 200, code, body)
	require.NoError(t, g.srv.Reload(context.Background()))
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false))
	assert.Equal(t, 429, code, body)

	upstream, refunds := inProcessUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent"}]
`, sha("agent-key"), upstream))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{"Idempotency-Key": "refund-A1", RunHeader: "order-7"})
	for i := range 2 {
		if i == 1 {
			require.NoError(t, s.srv.Reload(context.Background()))
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 40}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(t, res))
		assert.Equal(t, "refunded 40.00 on A1", text(t, res))
	}
	assert.EqualValues(t, 1, refunds.Load(), "the refund ran once, the reload between its two calls notwithstanding")
}

// TestDrainKeepsServingWhileUnready: at shutdown, with a drain delay, the
// server answers /readyz with 503 at once while the listener still accepts
// new connections and serves them; it closes once the delay has passed.
func TestDrainKeepsServingWhileUnready(t *testing.T) {
	const drain = 600 * time.Millisecond
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")), DrainDelay: drain})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) int {
		resp, err := client.Get(s.url + path)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 200, get("/readyz"))
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	require.Eventually(t, func() bool { return get("/readyz") == 503 }, drain/2, 5*time.Millisecond, "unready at once")
	assert.Equal(t, 200, get("/healthz"), "a new connection is still served while draining")
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	assert.GreaterOrEqual(t, time.Since(start), drain, "the listener stayed open for the drain delay")
	assert.Equal(t, 0, get("/healthz"), "the listener is closed after the drain")
	assert.Contains(t, s.logs.String(), "draining")
}

// TestClientInputNeverNamesAMetricSeries: the metrics' labels take only
// what the policy declares (models, tenants, layers) and the gateway's own
// names (routes, codes): a client sending requests with names of its own
// (unknown models, paths, keys, run ids, tools) adds no series, so it
// cannot grow the process's memory or the scraper's by inventing them.
func TestClientInputNeverNamesAMetricSeries(t *testing.T) {
	ok := reply{body: transcript(t, "openai", "text.sse")}
	g := newGateway(t, typicalChain, []reply{ok, ok, ok, ok}, nil)
	series := func() []string {
		var out []string
		for _, line := range strings.Split(g.metrics(t), "\n") {
			if strings.HasPrefix(line, "agentc_serve_") {
				out = append(out, line[:strings.LastIndexByte(line, ' ')])
			}
		}
		return out
	}
	round := func(i int) {
		name := fmt.Sprintf("invented-%d", i)
		do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody(name, "hi", false))
		do(t, "POST", g.url+"/v1/messages", clientKey, messagesBody(name, "hi", true))
		do(t, "POST", g.url+"/v1/messages/count_tokens", clientKey, []byte(`{"model":"`+name+`","messages":[{"role":"user","content":"hi"}]}`))
		do(t, "GET", g.url+"/v1/models/"+name, clientKey, nil)
		do(t, "GET", g.url+"/"+name, clientKey, nil)
		do(t, "POST", g.url+"/v1/chat/completions", name, chatBody("primary", "hi", false))
		do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "hi", false), RunHeader, name)
		do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(`{"model":"primary","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"`+name+`"}}]}`))
	}
	round(0)
	round(1)
	before := series()
	for i := 2; i < 4; i++ {
		round(i)
	}
	after := series()
	assert.Equal(t, before, after, "no series named by a client")
	assert.NotContains(t, strings.Join(after, "\n"), "invented")
}

// TestRequestAfterCloseIsRefused: a request that reached the server after
// Close (a host serving the handler on a server of its own, or a call an
// MCP session dispatched as the shutdown cut its connection) looped for
// ever looking for a generation that was not retired, spinning a CPU. It
// is now a 503 in the route's format.
func TestRequestAfterCloseIsRefused(t *testing.T) {
	srv, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WatchInterval: -1})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	for _, path := range []string{"/v1/models", "/v1/chat/completions", "/v1/messages"} {
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(string(chatBody("m", "hi", false)))))
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: a request after Close did not return", path)
		}
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, path)
		assert.Contains(t, rec.Body.String(), "shutting down", path)
	}
	code := httptest.NewRecorder()
	srv.ServeHTTP(code, httptest.NewRequest("GET", "/readyz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, code.Code)
}

// TestToolCallAfterCloseIsRefused: a tools/call an MCP session dispatched
// after Close (its connection cut by the shutdown, the call still queued
// in the session) ran on the last generation, retired and closed, its
// pipeline and stores shut. It is now refused as the other routes refuse
// a request after Close: an MCP error saying the server is shutting down,
// and the tool does not run.
func TestToolCallAfterCloseIsRefused(t *testing.T) {
	policy := `package gw

tools: echo: {description: "Echoes.", args: {type: "object"}}
`
	ran := 0
	srv, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, policy)), WatchInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tools: map[string]runtime.ToolFunc{"echo": func(context.Context, *runtime.ToolCall) (any, error) {
			ran++
			return "echo", nil
		}}})
	require.NoError(t, err)
	call := func() (*mcp.CallToolResult, error) {
		return srv.mcp.callTool(context.Background(), &mcp.CallToolRequest{
			Params: &mcp.CallToolParamsRaw{Name: "echo", Arguments: []byte(`{}`)},
			Extra:  &mcp.RequestExtra{Header: http.Header{RunHeader: {"r1"}}}})
	}
	res, err := call()
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, 1, ran)

	require.NoError(t, srv.Close())
	res, err = call()
	require.Error(t, err, "a call after Close is refused, not run: %+v", res)
	assert.Contains(t, err.Error(), "shutting down")
	assert.Equal(t, 1, ran, "the tool did not run")
}
