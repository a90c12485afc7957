package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// twoTenants declares a model the host serves and the keys of two
// tenants.
const twoTenants = `package gw
models: primary: {}
keys: {
	alice: {sha256: "%s", tenant: "bank-a"}
	bob: {sha256: "%s", tenant: "bank-b"}
}
`

// heldModel answers once release is closed, counting the calls that
// reached it on started.
func heldModel(started chan<- struct{}, release <-chan struct{}) runtime.ModelClient {
	return runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		yield(runtime.Delta{Text: "ok"})
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}})
		return nil
	})
}

// One tenant holding the gateway's calls in flight (slow streams, a
// stalled upstream) would leave none for the others, every call of theirs
// a 503: where the keys name more than one tenant, a tenant is served at
// most MaxInFlightPerTenant calls at once (half of MaxInFlight by
// default), and the others are served.
func TestOneTenantCannotHoldEveryCallInFlight(t *testing.T) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key")))),
		WatchInterval: -1, MaxInFlight: 4,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	call := func(c openai.Client) error {
		// Bounded: a call admitted past the share would wait for release.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "primary",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	alice, bob := client("alice-key"), client("bob-key")

	var wg sync.WaitGroup
	held := make([]error, 2)
	for i := range held {
		wg.Go(func() { held[i] = call(alice) })
	}
	for range held {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("alice's calls did not reach the model")
		}
	}

	err := call(alice)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "alice's third call, past her share")
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.Contains(t, apiErr.Message, "bank-a")
	assert.Equal(t, "1", apiErr.Response.Header.Get("Retry-After"))

	done := make(chan error, 1)
	go func() { done <- call(bob) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("bob's call was refused while alice held her share: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("bob's call did not reach the model")
	}
	close(release)
	require.NoError(t, <-done)
	wg.Wait()
	for _, err := range held {
		require.NoError(t, err)
	}
	// The share is returned when a call ends.
	require.NoError(t, call(alice))
	require.NoError(t, call(alice))
	assert.Contains(t, scrape(t, s.url), `agentc_serve_requests_total{code="503",model="-",route="chat_completions"} 1`)
}

// Under a policy whose keys name one tenant, that tenant is every caller:
// it is bounded by MaxInFlight alone.
func TestOneTenantHasEveryCallInFlight(t *testing.T) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf("package gw\nmodels: primary: {}\nkeys: alice: {sha256: %q}\n", sha("alice-key")))),
		WatchInterval: -1, MaxInFlight: 4,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	c := openai.NewClient(option.WithBaseURL(s.url+"/v1/"), option.WithAPIKey("alice-key"), option.WithMaxRetries(0))
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		})
	}
	for range errs {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the calls did not all reach the model")
		}
	}
	close(release)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// openBody starts a POST of a body of n bytes to url with key, sending
// only its first byte: the gateway charges the body when it reads the
// Content-Length, and holds it while the rest does not come.
func openBody(t *testing.T, url, key string, n int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", key, n)
	require.NoError(t, err)
	return conn
}

// One tenant trickling bodies (each within the body deadline) would hold
// every byte of MaxInFlightBytes, and every other tenant's call would be
// a 503: where the keys name more than one tenant, a tenant holds at most
// MaxInFlightBytesPerTenant (half of MaxInFlightBytes by default, and at
// least MaxBodyBytes), and the others are served.
func TestOneTenantCannotHoldEveryBodyByte(t *testing.T) {
	started, release := make(chan struct{}, 16), make(chan struct{})
	close(release)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key")))),
		WatchInterval: -1, MaxBodyBytes: 1000, MaxInFlightBytes: 4000,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	openBody(t, s.url, "alice-key", 1000)
	openBody(t, s.url, "alice-key", 1000)
	require.Eventually(t, func() bool {
		_, _, b := do(t, "GET", s.url+"/metrics", "", nil)
		return strings.Contains(b, "agentc_serve_request_body_bytes_in_flight 2000\n")
	}, 10*time.Second, 5*time.Millisecond)

	body := chatBody("primary", strings.Repeat("a", 900), false)
	require.Greater(t, len(body), 900)
	code, h, resp := do(t, "POST", s.url+"/v1/chat/completions", "alice-key", body)
	assert.Equal(t, http.StatusServiceUnavailable, code, resp)
	assert.Contains(t, resp, "bank-a")
	assert.Equal(t, "1", h.Get("Retry-After"))

	code, _, resp = do(t, "POST", s.url+"/v1/chat/completions", "bob-key", body)
	assert.Equal(t, http.StatusOK, code, resp)
	code, _, resp = do(t, "POST", s.url+"/v1/chat/completions", "alice-key", chatBody("primary", "hi", false))
	assert.Equal(t, http.StatusServiceUnavailable, code, "alice's share is held: %s", resp)
}

// A tenant's share of the body bytes below the largest body would refuse
// every body at the limit: New fails, as for MaxInFlightBytes.
func TestTenantBodyShareBelowTheBodyLimitFails(t *testing.T) {
	_, err := New(context.Background(), Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")),
		MaxBodyBytes: 1000, MaxInFlightBytesPerTenant: 999})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "serve: -maxinflightbytestenant (Options.MaxInFlightBytesPerTenant, 999) must be at least -maxbody (Options.MaxBodyBytes, 1000)")
}

// Reloads that race (SIGHUP, the watcher, Server.Reload at once) run one
// at a time while calls are served: each installs a generation of its
// own, none fails, and no call is refused or lost.
func TestRacingReloadsUnderLoad(t *testing.T) {
	const reloads, calls = 12, 40
	// Room for every call: none waits to be counted.
	started, release := make(chan struct{}, calls), make(chan struct{})
	close(release)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key")))),
		WatchInterval: -1,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": heldModel(started, release)}, nil
		}})
	var wg sync.WaitGroup
	errs := make(chan error, reloads+calls)
	for range reloads {
		wg.Go(func() { errs <- s.srv.Reload(context.Background()) })
	}
	for range calls {
		wg.Go(func() {
			code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "alice-key", chatBody("primary", "hi", false))
			if code != http.StatusOK {
				errs <- fmt.Errorf("call: %d %s", code, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	code, _, body := do(t, "GET", s.url+"/readyz", "", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, fmt.Sprintf("generation %d", reloads+1))
	assert.Contains(t, scrape(t, s.url), fmt.Sprintf(`agentc_serve_reloads_total{result="ok"} %d`, reloads))
}

// A reload that removes a model a call is using: the call finishes on the
// generation it started on, which is closed only once it has; a call
// naming the model after the reload is 404 unknown_model.
func TestReloadRemovingAModelInUse(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	dir := writePolicy(t, "package gw\nmodels: {primary: {}, backup: {}}\n")
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1,
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			m := heldModel(started, release)
			return map[string]runtime.ModelClient{"primary": m, "backup": m}, nil
		}})
	done := make(chan int, 1)
	go func() {
		code, _, _ := do(t, "POST", s.url+"/v1/chat/completions", "", chatBody("backup", "hi", true))
		done <- code
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the model")
	}
	old := s.srv.cur.Load()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: primary: {}\n"), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))

	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", "", chatBody("backup", "hi", false))
	assert.Equal(t, http.StatusNotFound, code, body)
	assert.Contains(t, body, "unknown_model")
	select {
	case <-old.done:
		t.Fatal("the replaced generation was closed under the call it serves")
	default:
	}
	close(release)
	assert.Equal(t, http.StatusOK, <-done, "the call finishes on its generation")
	select {
	case <-old.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced generation was not closed after its last call")
	}
}

// TestTenantBodyBytesAreExact: a tenant's share of the body bytes in
// flight admits bytes up to its bound and none past it, whatever the
// other tenants hold; what a request returns is charged again, and a
// tenant holding nothing is forgotten.
func TestTenantBodyBytesAreExact(t *testing.T) {
	s := &Server{opts: Options{MaxInFlightBytes: 25, MaxInFlightBytesPerTenant: 10}, tenantBytes: map[string]*tenantBody{}}
	g := &generation{tenants: 2}
	ex := func(tenant string) *exchange { return &exchange{s: s, g: g, caller: caller{tenant: tenant}} }
	a1, a2, b := ex("a"), ex("a"), ex("b")
	require.True(t, s.chargeBody(a1, 6))
	assert.False(t, s.chargeBody(a2, 5), "6 + 5 is past a's 10")
	assert.True(t, a2.tenantBytesOver)
	require.True(t, s.chargeBody(a2, 4), "6 + 4 is a's 10")
	require.True(t, s.chargeBody(b, 10), "b's share is its own")
	assert.False(t, s.chargeBody(b, 1))
	assert.EqualValues(t, 20, s.bodyBytes.Load())
	s.leaveBody(a1)
	assert.True(t, s.chargeBody(a2, 6), "a1's 6 returned")
	for _, x := range []*exchange{a1, a2, b} {
		s.leaveBody(x)
	}
	assert.Zero(t, s.bodyBytes.Load())
	assert.Zero(t, len(s.tenantBytes), "no tenant holds a byte")

	// Concurrent charges of one tenant's reads, a byte each until refused,
	// admit its bound exactly: none past it, and none refused short of it.
	s = &Server{opts: Options{MaxInFlightBytes: -1, MaxInFlightBytesPerTenant: 1000}, tenantBytes: map[string]*tenantBody{}}
	reqs := make([]*exchange, 8)
	var wg sync.WaitGroup
	for i := range reqs {
		reqs[i] = ex("a")
		wg.Add(1)
		go func(x *exchange) {
			defer wg.Done()
			for s.chargeBody(x, 1) {
			}
		}(reqs[i])
	}
	wg.Wait()
	var held int64
	for _, x := range reqs {
		held += x.tenantBytes
		s.leaveBody(x)
	}
	assert.EqualValues(t, 1000, held)
	assert.Zero(t, len(s.tenantBytes))
}
