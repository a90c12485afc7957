package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

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
	stderr := &lockedBuffer{}
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

	cancel()
	select {
	case rc := <-done:
		assert.Equal(t, exitOK, rc)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of its context ending")
	}
	_, _, err = get("http://" + metrics + "/metrics")
	assert.Error(t, err, "the metrics listener is closed with the server")
	assert.Contains(t, stderr.String(), "serving metrics")
}

// lockedBuffer is a buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The caps on runs and sessions are flags; a cap under 1 is refused.
func TestServeCapsFlags(t *testing.T) {
	for _, args := range [][]string{{"-maxruns", "0", "p"}, {"-maxsessions", "-3", "p"}} {
		stderr := &lockedBuffer{}
		rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, args)
		assert.Equal(t, exitUsage, rc, "%v", args)
		assert.Contains(t, stderr.String(), "-maxruns and -maxsessions must be at least 1")
	}
	stderr := &lockedBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-maxruns")
	assert.Contains(t, stderr.String(), "-maxsessions")
}

// A negative drain delay is refused; the flag is in the usage.
func TestServeDrainFlag(t *testing.T) {
	stderr := &lockedBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-drain", "-1s", "p"})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), "-drain must not be negative")
	stderr = &lockedBuffer{}
	rc = cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-h"})
	assert.Equal(t, exitOK, rc)
	assert.Contains(t, stderr.String(), "-drain")
}
