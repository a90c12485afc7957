package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// freeAddr returns a loopback address with a port free at the time of the
// call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func get(url string) (int, string, error) { return getAs(url, "") }

// serve -metrics ADDR serves the metrics and the health endpoints there, and
// not on -listen, where callers are.
func TestServeMetricsListener(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"),
		[]byte("package p\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\"}\n"), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	listen, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &rt.LogBuffer{}
	env := &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}
	done := make(chan int, 1)
	go func() {
		done <- cmdServe(ctx, env, []string{"-listen", listen, "-metrics", metrics, "-watch", "0", dir})
	}()

	require.Eventually(t, func() bool {
		code, _, err := get("http://" + metrics + "/metrics")
		return err == nil && code == 200
	}, 30*time.Second, 10*time.Millisecond, "the metrics listener did not come up")
	code, body, err := get("http://" + metrics + "/metrics")
	require.NoError(t, err)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "agentc_serve_policy_generation 1")
	code, _, err = get("http://" + metrics + "/readyz")
	require.NoError(t, err)
	assert.Equal(t, 200, code)

	require.Eventually(t, func() bool {
		code, _, err := get("http://" + listen + "/healthz")
		return err == nil && code == 200
	}, 30*time.Second, 10*time.Millisecond, "the main listener did not come up")
	code, body, err = get("http://" + listen + "/metrics")
	require.NoError(t, err)
	assert.Equal(t, 404, code, "the callers' listener does not serve the metrics")
	assert.NotContains(t, body, "agentc_serve")

	stopServe(t, cancel, done)
	_, _, err = get("http://" + metrics + "/metrics")
	assert.Error(t, err, "the metrics listener is closed with the server")
	assert.Contains(t, stderr.String(), "serving metrics")
}

// stopServe ends the context of a cmdServe running in a goroutine (cancel)
// and waits for its exit code on done: exitOK.
func stopServe(t *testing.T, cancel context.CancelFunc, done <-chan int) {
	t.Helper()
	cancel()
	select {
	case rc := <-done:
		assert.Equal(t, exitOK, rc)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of its context ending")
	}
}

// The caps on runs and sessions are flags; a cap under 1 is refused.
func TestServeCapsFlags(t *testing.T) {
	for _, args := range [][]string{{"-maxruns", "0", "p"}, {"-maxsessions", "-3", "p"}} {
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, args)
		assert.Equal(t, exitUsage, rc, "%v", args)
		assert.Contains(t, stderr.String(), "-maxruns and -maxsessions must be at least 1")
	}
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-maxbody", "2048", "-maxinflightbytes", "1024", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "agentc: serve: -maxinflightbytes (Options.MaxInFlightBytes, 1024) must be at least -maxbody (Options.MaxBodyBytes, 2048)")
	assert.NotContains(t, stderr.String(), "serve p:", "an option's error is not the policy's")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-maxruns")
	assert.Contains(t, stderr.String(), "-maxsessions")
	for _, f := range []string{"-maxmessages", "-maxparts", "-maxinflight", "-maxinflightbytes"} {
		assert.Contains(t, stderr.String(), f)
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{f, "-1", "p"})
		assert.Equal(t, exitUsage, rc, f)
		assert.Contains(t, stderr.String(), "must not be negative (0: no bound)")
	}
	assert.Contains(t, stderr.String(), "-maxinflighttenant")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-maxinflighttenant", "-1", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "-maxinflighttenant and -maxinflightbytestenant must not be negative")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-maxbody", "2048", "-maxinflightbytestenant", "1024", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "agentc: serve: -maxinflightbytestenant (Options.MaxInFlightBytesPerTenant, 1024) must be at least -maxbody (Options.MaxBodyBytes, 2048)")
}

// The bound of the tool calls of one model answer relayed is a flag,
// -maxtoolcalls (64, an agent run's bound), at least 1.
func TestServeMaxToolCallsFlag(t *testing.T) {
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-maxtoolcalls")
	for _, n := range []string{"0", "-1"} {
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-maxtoolcalls", n, "p"})
		assert.Equal(t, exitUsage, rc, n)
		assert.Contains(t, stderr.String(), "agentc: serve: -maxtoolcalls must be at least 1, got "+n, n)
	}
}

// A -listen or -metrics address without a port ("8080", "localhost") was
// found out only once the policy had loaded, by an error that did not name
// the flag; it is refused before the policy is read ("p" does not exist),
// naming the flag and the form it takes.
func TestServeListenFlag(t *testing.T) {
	for _, args := range [][]string{{"-listen", "8080", "p"}, {"-listen", "localhost", "p"}, {"-listen", "127.0.0.1:99999", "p"}, {"-metrics", "9090", "p"}} {
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, args)
		assert.Equal(t, exitUsage, rc, "%v", args)
		assert.Contains(t, stderr.String(), "agentc: serve: "+args[0]+" "+args[1]+": ", "%v", args)
		assert.Contains(t, stderr.String(), "want HOST:PORT", "%v", args)
		assert.NotContains(t, stderr.String(), "no such file", "%v: the policy is not read", args)
	}
}

// A negative drain delay is refused; the flag is in the usage.
func TestServeDrainFlag(t *testing.T) {
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-drain", "-1s", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "-drain must not be negative")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-drain")
}

// A second SIGTERM or SIGINT during the drain or the grace stops the server
// at once: the request in flight is cut, and the process exits 1 without
// waiting out -drain and -grace. The server runs as a process of its own
// (the agentc command the test binary provides), signalled as an
// orchestrator or an operator would.
func TestServeSecondSignalStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain string
		sig   syscall.Signal
	}{
		{"drain/SIGTERM", "10m", syscall.SIGTERM},
		{"grace/SIGINT", "0", syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) { testSecondSignal(t, tc.drain, tc.sig) })
	}
}

func testSecondSignal(t *testing.T, drain string, sig syscall.Signal) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // the model never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer upstream.Close()
	defer close(release)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package p\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\", base_url: \""+upstream.URL+"/v1\"}\n"), 0o644))
	listen := freeAddr(t)
	stderr := &rt.LogBuffer{}
	cmd := exec.Command("agentc", "serve", "-listen", listen, "-drain", drain, "-grace", "10m", "-watch", "0", dir)
	cmd.Env = append(os.Environ(), "AGENTC_TEST_SERVE_KEY=k")
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
	}()
	require.Eventually(t, func() bool {
		code, _, err := get("http://" + listen + "/healthz")
		return err == nil && code == 200
	}, 60*time.Second, 20*time.Millisecond, "the server did not come up: %s", stderr)

	inflight := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+listen+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model": "primary", "messages": [{"role": "user", "content": "hi"}]}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		inflight <- err
	}()
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the request did not reach the model: %s", stderr)
	}

	pid := cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, sig))
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), "a second signal stops at once")
	}, 60*time.Second, 20*time.Millisecond, "the server did not start its shutdown: %s", stderr)
	if drain != "0" {
		code, _, err := get("http://" + listen + "/readyz")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, code, "draining")
	}
	select {
	case err := <-exited:
		t.Fatalf("the first signal stopped the server (%v): %s", err, stderr)
	case err := <-inflight:
		t.Fatalf("the first signal ended the request in flight (%v): %s", err, stderr)
	default:
	}

	require.NoError(t, syscall.Kill(pid, sig))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit: %v", err)
		assert.Equal(t, exitProblems, ee.ExitCode(), "%s", stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("the second signal did not stop the server within 60s (drain %s, grace 10m): %s", drain, stderr)
	}
	select {
	case <-inflight: // cut: an error, or the error body of a cancelled call
	case <-time.After(60 * time.Second):
		t.Fatal("the request in flight was not cut")
	}
	assert.Contains(t, stderr.String(), "second signal: stopping at once")
	assert.Contains(t, stderr.String(), "agentc: serve: stopped at once by a second signal")
}

// A plan written by agentc build serves as its policy does: the same
// models, the same keys (a wrong key refused); its relative paths resolve
// against the plan's directory (the sqlite file is created there).
func TestServeBuiltPlanAsItsPolicy(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "policy.cue"), []byte(`package p

models: primary: {provider: "openai", model: "m", api_key_env: "AGENTC_TEST_SERVE_KEY"}
models: backup: {provider: "openai", model: "n", api_key_env: "AGENTC_TEST_SERVE_KEY"}
keys: app: {env: "AGENTC_TEST_APP_KEY", tenant: "app"}
stores: db: {kind: "sqlite", path: "state.db"}
chains: chat: [{use: "memoize", store: "db", ttl: "1h"}]
`), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	t.Setenv("AGENTC_TEST_APP_KEY", "app-key")
	planFile := filepath.Join(out, "plan.json")
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, wd: src}
	require.Equal(t, exitOK, cmdBuild(context.Background(), env, []string{"-o", planFile, src}))

	models := func(policy string) ([]string, int) {
		t.Helper()
		listen := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- cmdServe(ctx, &cliEnv{stdout: io.Discard, stderr: &rt.LogBuffer{}, wd: src}, []string{"-listen", listen, "-watch", "0", policy})
		}()
		defer func() {
			cancel()
			require.Equal(t, exitOK, <-done)
		}()
		call := func(key string) (int, string) {
			req, err := http.NewRequest("GET", "http://"+listen+"/v1/models", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, ""
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		require.Eventually(t, func() bool { code, _ := call("app-key"); return code == 200 }, 30*time.Second, 10*time.Millisecond)
		_, body := call("app-key")
		var list struct {
			Data []struct {
				ID      string `json:"id"`
				OwnedBy string `json:"owned_by"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID+" of "+m.OwnedBy)
		}
		wrong, _ := call("other-key")
		return ids, wrong
	}
	fromPolicy, wrongPolicy := models(src)
	fromPlan, wrongPlan := models(planFile)
	assert.Equal(t, fromPolicy, fromPlan)
	assert.Equal(t, []string{"backup of p", "primary of p"}, fromPlan)
	assert.Equal(t, 401, wrongPolicy)
	assert.Equal(t, 401, wrongPlan)
	assert.FileExists(t, filepath.Join(src, "state.db"))
	assert.FileExists(t, filepath.Join(out, "state.db"), "the plan's relative paths resolve against its directory")
}

// With -log json every line serve writes is JSON, the Redis client
// library's own messages included: a store that cannot be dialled made it
// print a line of its own on standard error ("redis: ... pool.go:770:
// redis: connection pool: failed to dial after 5 attempts"), at start and
// on every call during an outage.
func TestServeJSONLogCarriesTheRedisClientsMessages(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

models: primary: {provider: "openai", model: "m", api_key_env: "AGENTC_TEST_SERVE_KEY"}
stores: shared: {kind: "redis", url: "redis://`+freeAddr(t)+`/0", prefix: "p", timeout: "1s"}
chains: chat: [{use: "rate_limit", rate: 1, per: "1s", store: "shared"}]
`), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir},
		[]string{"-listen", freeAddr(t), "-watch", "0", "-log", "json", dir})
	assert.Equal(t, exitUsage, rc, "the store cannot be opened")
	out := stderr.String()
	assert.Contains(t, out, "failed to dial")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "agentc: ") {
			continue // the error serve exits with
		}
		assert.True(t, json.Valid([]byte(line)), "a log line that is not JSON: %s", line)
	}
}

// getAs sends GET url with host as its Host header (the URL's host when
// empty).
func getAs(url, host string) (int, string, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// serve -allowhost NAME (repeatable) names the hosts a request's Host may
// name besides localhost and IP addresses; another name is a 421 on
// loopback. A value that is not a host name is refused.
func TestServeAllowHostFlag(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"),
		[]byte("package p\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\"}\n"), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := &cliEnv{stdout: io.Discard, stderr: &rt.LogBuffer{}, wd: dir}
	done := make(chan int, 1)
	go func() {
		done <- cmdServe(ctx, env, []string{"-listen", listen, "-allowhost", "gw.one.example", "-allowhost", "gw.two.example", "-watch", "0", dir})
	}()
	require.Eventually(t, func() bool {
		code, _, err := get("http://" + listen + "/healthz")
		return err == nil && code == 200
	}, 30*time.Second, 10*time.Millisecond, "the listener did not come up")
	for _, host := range []string{"gw.one.example", "gw.two.example:8080", listen, "localhost"} {
		code, body, err := getAs("http://"+listen+"/metrics", host)
		require.NoError(t, err)
		assert.Equal(t, 200, code, "%s: %s", host, body)
	}
	code, body, err := getAs("http://"+listen+"/metrics", "evil.example:8080")
	require.NoError(t, err)
	assert.Equal(t, http.StatusMisdirectedRequest, code)
	assert.Contains(t, body, "-allowhost NAME")
	stopServe(t, cancel, done)

	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-allowhost", "gw.example:8080", "-watch", "0", dir})
	assert.NotEqual(t, exitOK, rc)
	assert.Contains(t, stderr.String(), `"gw.example:8080" is not a host name`)
	// A bad -allowhost is a usage error named by its flag, found before
	// the policy is read (here a path that does not exist).
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-allowhost", "https://gw.example", filepath.Join(dir, "missing")})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), `invalid value "https://gw.example" for flag -allowhost: "https://gw.example" is not a host name`)
	assert.NotContains(t, stderr.String(), "missing")
	assert.NotContains(t, stderr.String(), "Options.AllowHosts")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-allowhost NAME")
}

// A policy without keys serves every caller: on an address other than a
// loopback one, serve refuses it before listening, unless -keyless says
// that is meant.
func TestServeKeylessPolicyOnANetworkAddress(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"),
		[]byte("package p\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\"}\n"), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	for _, listen := range []string{":0", "0.0.0.0:0", "[::]:0", "gw.internal.example:0"} {
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-listen", listen, "-watch", "0", dir})
		assert.Equal(t, exitUsage, rc, listen)
		assert.Contains(t, stderr.String(), "the policy declares no keys", listen)
		assert.Contains(t, stderr.String(), "-keyless", listen)
	}

	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-keyless")
}

// clientless names every model without a provider, in the plural when
// there are several ("model "coder", "fast" declares" read wrong).
func TestClientlessNamesTheModels(t *testing.T) {
	one := &plan.Plan{Models: map[string]plan.Model{"primary": {}}}
	require.EqualError(t, clientless(one), `model "primary" declares no provider: agentc serve has no client for it (give it provider, model and api_key_env: docs/providers.md)`)
	two := &plan.Plan{Models: map[string]plan.Model{"fast": {}, "coder": {}, "cloud": {Provider: "openai"}}}
	require.EqualError(t, clientless(two), `models "coder", "fast" declare no provider: agentc serve has no client for them (give each provider, model and api_key_env: docs/providers.md)`)
}

// On a terminal a policy that does not vet at start is shown as agentc vet
// shows it, each error with its source line and a caret under the column
// (the diagnostics of a reload go to the log, one line each).
func TestServeStartErrorsHaveExcerpts(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package p\n\nchains: chat: [{use: \"retyr\"}]\n"), 0o644))
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir, excerpts: true}, []string{"-listen", "127.0.0.1:0", "-watch", "0", dir})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "policy.cue:3:22: error schema/unknown-middleware: unknown middleware \"retyr\"; did you mean \"retry\"?\n\tchains: chat: [{use: \"retyr\"}]\n\t                     ^")
}

// -cacheusage says whether the prompt-cache figures of a call's usage reach
// the client (serve.CacheUsage); a value other than auto, report or
// withhold is refused before the policy is read, naming the flag.
func TestServeCacheUsageFlag(t *testing.T) {
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-cacheusage", "hide", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), `agentc: serve: -cacheusage (Options.CacheUsage) must be auto, report or withhold, got "hide"`)
	assert.NotContains(t, stderr.String(), "no such file", "the policy is not read")
	stderr = &rt.LogBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-cacheusage")
}

// An address another process listens on is refused naming the address and
// what to do: stop that process or give -listen (or -metrics) another one.
func TestServeAddressInUse(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"),
		[]byte("package p\n\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\"}\n"), 0o644))
	t.Setenv("AGENTC_TEST_SERVE_KEY", "k")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, args := range [][]string{{"-listen", busy.Addr().String()}, {"-listen", freeAddr(t), "-metrics", busy.Addr().String()}} {
		flag := args[len(args)-2]
		stderr := &rt.LogBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, append(args, "-watch", "0", dir))
		assert.Equal(t, exitUsage, rc, "%v", args)
		assert.Contains(t, stderr.String(), "serve: "+flag+" "+busy.Addr().String()+": another process listens there (an agentc serve still running?): stop it, or give "+flag+" another address", "%v", args)
	}
}

// TestServePolicySourceNamesPositionsAsVet: serve's log names a plan's
// position (a layer whose state a change leaves behind) with the policy's
// directory as vet names its files, relative to the working directory; a
// built plan, whose positions are relative to a directory it does not
// name, keeps them as they are.
func TestServePolicySourceNamesPositionsAsVet(t *testing.T) {
	wd := t.TempDir()
	pol := filepath.Join(wd, "pol")
	require.NoError(t, os.MkdirAll(pol, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pol, "policy.cue"), []byte("package p\nmodels: primary: {provider: \"openai\", model: \"m\", api_key_env: \"AGENTC_TEST_SERVE_KEY\"}\n"), 0o644))
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, wd: wd}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ld, err := policySource(pol, env, logger).Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "pol", ld.PosDir)

	var stdout, stderr strings.Builder
	planFile := filepath.Join(wd, "plan.json")
	require.Equal(t, exitOK, Main(context.Background(), []string{"build", "-o", planFile, pol}, &stdout, &stderr), stderr.String())
	ld, err = policySource(planFile, env, logger).Load(context.Background())
	require.NoError(t, err)
	assert.Empty(t, ld.PosDir)
}

// A store serve cannot open stops it with the position of the layer that
// opens it, as agentc test and prove place it.
func TestServeStoreOpenErrorIsPlaced(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blocker"), []byte("a file, not a directory"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

keys: app: {env: "AGENTC_TEST_STORE_PLACED_KEY", tenant: "t"}
stores: trail: {kind: "sqlite", path: "blocker/audit.db"}
chains: tool: [
	{use: "audit", sink: "trail"},
]
`), 0o600))
	t.Setenv("AGENTC_TEST_STORE_PLACED_KEY", "key0123456789abcdefghij")
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: dir}, []string{"-listen", "127.0.0.1:0", dir})
	assert.NotEqual(t, exitOK, rc)
	assert.Contains(t, stderr.String(), `agentc: policy.cue:6:2: serve `+dir+`: build chains.tool[0] "audit": `)
}
