package serve

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// retryPolicy admits the keys named, and rate-limits chat calls in a redis
// store at url whose timeout is timeout.
func retryPolicy(url, prefix, timeout string, keys ...string) string {
	var decl []string
	for _, k := range keys {
		decl = append(decl, fmt.Sprintf(`%s: {sha256: "%s", tenant: "acme"}`, k, sha(k+"-key")))
	}
	return fmt.Sprintf(`package gw

keys: {%s}
models: one: {}
stores: state: {kind: "redis", url: %q, prefix: %q, timeout: %q}
chains: chat: [{use: "rate_limit", rate: 1000, per: "1m", scope: "key", store: "state"}]
`, strings.Join(decl, ", "), url, prefix, timeout)
}

// setReloadRetry sets the first and longest wait before a failed reload
// is tried again until the test ends.
func setReloadRetry(t *testing.T, first, most time.Duration) {
	oldFirst, oldMost := reloadRetryFirst, reloadRetryMax
	reloadRetryFirst, reloadRetryMax = first, most
	t.Cleanup(func() { reloadRetryFirst, reloadRetryMax = oldFirst, oldMost })
}

// TestReloadFailedOnAStoreIsTriedAgain: a reload that revokes a key and
// changes a store's timeout fails while the store is unreachable; once
// the store answers again, the reload is tried again on its own, without
// a change of the files or a signal, and the revoked key is refused.
func TestReloadFailedOnAStoreIsTriedAgain(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	setReloadRetry(t, 10*time.Millisecond, 50*time.Millisecond)
	prefix := storetest.Prefix(t)
	dir := writePolicy(t, retryPolicy(proxy.URL, prefix, "2s", "app1", "app2"))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	code, _, body := do(t, "GET", s.url+"/v1/models", "app2-key", nil)
	require.Equal(t, 200, code, body)

	proxy.Cut()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(retryPolicy(proxy.URL, prefix, "1s", "app1")), 0o644))
	err := s.srv.Reload(context.Background())
	require.ErrorContains(t, err, "open store")
	assert.Contains(t, s.logs.String(), "reload failed; still serving the previous policy")
	assert.Contains(t, s.logs.String(), "retry_in=")
	code, _, _ = do(t, "GET", s.url+"/v1/models", "app1-key", nil)
	assert.Equal(t, 200, code, "the previous policy serves while the store is down")
	before := s.srv.cur.Load().n

	proxy.Restore()
	require.Eventually(t, func() bool { return s.srv.cur.Load().n > before }, 10*time.Second, 10*time.Millisecond,
		"the reload applies once the store answers")
	code, _, _ = do(t, "GET", s.url+"/v1/models", "app2-key", nil)
	assert.Equal(t, 401, code, "the revoked key is refused")
	code, _, body = do(t, "GET", s.url+"/v1/models", "app1-key", nil)
	assert.Equal(t, 200, code, body)
	assert.Contains(t, s.logs.String(), "trying the failed reload again")
	metrics := scrape(t, s.url)
	assert.Contains(t, metrics, `agentc_serve_reloads_total{result="ok"} 1`)
	assert.NotContains(t, metrics, `agentc_serve_reloads_total{result="failed"} 0`)
	s.srv.reloadMu.Lock()
	defer s.srv.reloadMu.Unlock()
	assert.Nil(t, s.srv.retry, "no retry is pending once the reload applied")
}

// TestReloadFailedOnThePolicyIsNotTriedAgain: a reload the policy itself
// fails (a file that does not compile) waits for the next change of the
// files: no retry is scheduled, and one scheduled before is dropped.
func TestReloadFailedOnThePolicyIsNotTriedAgain(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	setReloadRetry(t, time.Hour, time.Hour)
	prefix := storetest.Prefix(t)
	dir := writePolicy(t, retryPolicy(proxy.URL, prefix, "2s", "app1", "app2"))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	proxy.Cut()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(retryPolicy(proxy.URL, prefix, "1s", "app1")), 0o644))
	require.Error(t, s.srv.Reload(context.Background()))
	s.srv.reloadMu.Lock()
	assert.NotNil(t, s.srv.retry, "a store out of reach is tried again")
	s.srv.reloadMu.Unlock()

	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: {"), 0o644))
	err := s.srv.Reload(context.Background())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "open store")
	s.srv.reloadMu.Lock()
	defer s.srv.reloadMu.Unlock()
	assert.Nil(t, s.srv.retry, "a policy that does not compile is not tried again")
}

// TestReloadFailedOnAnMCPUpstreamIsTriedAgain: a reload that cannot reach
// an MCP server the policy adds is tried again, as one that cannot open a
// store is.
func TestReloadFailedOnAnMCPUpstreamIsTriedAgain(t *testing.T) {
	setReloadRetry(t, time.Hour, time.Hour)
	dir := writePolicy(t, "package gw\nmodels: one: {}\n")
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	gone := "http://" + closedAddr(t) + "/mcp"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: one: {}\nmcp: servers: pay: url: \""+gone+"\"\n"), 0o644))
	require.Error(t, s.srv.Reload(context.Background()))
	s.srv.reloadMu.Lock()
	defer s.srv.reloadMu.Unlock()
	require.NotNil(t, s.srv.retry, "an MCP server out of reach is tried again")
	assert.Equal(t, time.Hour, s.srv.retry.wait)
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestReloadRetriesWaitLonger: each failed retry doubles the wait, up to
// the longest, and a reload of a change starts again from the first.
func TestReloadRetriesWaitLonger(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	setReloadRetry(t, 5*time.Millisecond, 20*time.Millisecond)
	prefix := storetest.Prefix(t)
	dir := writePolicy(t, retryPolicy(proxy.URL, prefix, "2s", "app1", "app2"))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	proxy.Cut()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(retryPolicy(proxy.URL, prefix, "1s", "app1")), 0o644))
	require.Error(t, s.srv.Reload(context.Background()))
	retry := func() (int, time.Duration) {
		s.srv.reloadMu.Lock()
		defer s.srv.reloadMu.Unlock()
		if s.srv.retry == nil {
			return 0, 0
		}
		return s.srv.retry.attempt, s.srv.retry.wait
	}
	attempt, wait := retry()
	require.Equal(t, 1, attempt)
	require.Equal(t, 5*time.Millisecond, wait)
	require.Eventually(t, func() bool { a, _ := retry(); return a >= 4 }, 10*time.Second, time.Millisecond)
	_, wait = retry()
	assert.Equal(t, 20*time.Millisecond, wait, "5, 10, 20, then 20 again")
	s.srv.reloadMu.Lock()
	reloadRetryFirst = time.Hour // read under reloadMu
	s.srv.reloadMu.Unlock()
	require.Error(t, s.srv.Reload(context.Background()))
	attempt, wait = retry()
	assert.Equal(t, 1, attempt, "a reload of its own starts again")
	assert.Equal(t, time.Hour, wait, "from the first wait")
}

// TestReloadFailedOnAnUpstreamsSettingsIsNotTriedAgain: a reload that
// fails on what the files say of an MCP server, not on reaching it (a
// header's variable that is not set, two servers exposing the same tool
// name), waits for the files to change: no retry is scheduled.
func TestReloadFailedOnAnUpstreamsSettingsIsNotTriedAgain(t *testing.T) {
	setReloadRetry(t, time.Hour, time.Hour)
	up := newNoteServer(t)
	dir := writePolicy(t, notePolicyFor(up.url, ""))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1,
		LookupEnv: func(string) (string, bool) { return "", false }})
	for _, tc := range []struct{ policy, err string }{
		{notePolicyFor(up.url, `, headers: {Authorization: "Bearer ${AGENTC_TEST_UNSET_TOKEN}"}`), "AGENTC_TEST_UNSET_TOKEN"},
		{notePolicyFor(up.url, "") + fmt.Sprintf("mcp: servers: web2: {url: %q, prefix: \"web_\"}\n", up.url), "web2"},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(tc.policy), 0o644))
		err := s.srv.Reload(context.Background())
		require.ErrorContains(t, err, tc.err)
		assert.False(t, transientReload(err), "%v", err)
		s.srv.reloadMu.Lock()
		assert.Nil(t, s.srv.retry, "no retry is scheduled for %v", err)
		s.srv.reloadMu.Unlock()
	}
	assert.NotContains(t, s.logs.String(), "retry_in=")
}

// claimedRedis is a redis kind whose stores a policy declares without a
// prefix, so that the policy claims them, opened in a namespace of the
// test's own rather than the server's default.
const claimedRedis = "test.claimed-redis"

var claimedNamespace string

func init() {
	runtime.RegisterStoreKind(claimedRedis, func(ctx context.Context, _ string, s plan.Store) (runtime.StoreBackend, error) {
		return redis.Open(ctx, s.URL, claimedNamespace)
	})
}

// TestAKeyRevokedWhileAClaimedStoreIsDownIsRefusedAtOnce: a change that
// revokes a key and leaves the store's declaration and the policy's name
// alone applies while the store, claimed by the policy, is out of reach:
// the revoked key is refused at once, the other served.
func TestAKeyRevokedWhileAClaimedStoreIsDownIsRefusedAtOnce(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	setReloadRetry(t, time.Hour, time.Hour)
	claimedNamespace = storetest.Prefix(t)
	policy := func(keys ...string) string {
		src := retryPolicy(proxy.URL, "none", "2s", keys...)
		return strings.Replace(strings.Replace(src, `kind: "redis"`, `kind: "`+claimedRedis+`"`, 1), `prefix: "none", `, "", 1)
	}
	dir := writePolicy(t, policy("app1", "app2"))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	code, _, body := do(t, "GET", s.url+"/v1/models", "app2-key", nil)
	require.Equal(t, 200, code, body)

	proxy.Cut()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy("app1")), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	code, _, _ = do(t, "GET", s.url+"/v1/models", "app2-key", nil)
	assert.Equal(t, 401, code, "the revoked key is refused while the store is down")
	code, _, body = do(t, "GET", s.url+"/v1/models", "app1-key", nil)
	assert.Equal(t, 200, code, body)
}

// TestAKeyRemovedByAReloadThatFailsOnAStoreIsRefused: a reload that
// revokes a key and declares a store differently fails while the store is
// out of reach; the key it removes is refused at once all the same, the
// keys it keeps served by the previous policy. A reload that fails for
// another reason (a file that does not compile) keeps the refusal, one
// that applies leaves the keys to the new policy.
func TestAKeyRemovedByAReloadThatFailsOnAStoreIsRefused(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	setReloadRetry(t, time.Hour, time.Hour)
	prefix := storetest.Prefix(t)
	dir := writePolicy(t, retryPolicy(proxy.URL, prefix, "2s", "app1", "app2", "app3"))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	status := func(key string) int {
		code, _, _ := do(t, "GET", s.url+"/v1/models", key, nil)
		return code
	}
	require.Equal(t, 200, status("app2-key"))
	write := func(src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	}

	proxy.Cut()
	write(retryPolicy(proxy.URL, prefix, "1s", "app1", "app3"))
	require.ErrorContains(t, s.srv.Reload(context.Background()), "open store")
	assert.Equal(t, 401, status("app2-key"), "the key the failed reload removes is refused")
	assert.Equal(t, 200, status("app1-key"), "the previous policy serves the others")
	assert.Contains(t, s.logs.String(), "keys the failed reload removes are refused until it applies")
	assert.Contains(t, s.logs.String(), "keys=[app2]")

	write("package gw\nmodels: {")
	require.Error(t, s.srv.Reload(context.Background()))
	assert.Equal(t, 401, status("app2-key"), "a reload that fails on the policy keeps the refusal")

	write(retryPolicy(proxy.URL, prefix, "1s", "app1"))
	require.ErrorContains(t, s.srv.Reload(context.Background()), "open store")
	assert.Equal(t, 401, status("app3-key"), "each failed reload refuses what it removes")
	assert.Equal(t, 401, status("app2-key"))

	proxy.Restore()
	write(retryPolicy(proxy.URL, prefix, "1s", "app1", "app2"))
	require.NoError(t, s.srv.Reload(context.Background()))
	assert.Equal(t, 200, status("app2-key"), "the policy that applies decides")
	assert.Equal(t, 401, status("app3-key"))
}
