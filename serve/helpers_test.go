package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// cueSource compiles the policy directory dir, as `agentc serve` does.
func cueSource(dir string) Source {
	return SourceFunc(func(ctx context.Context) (*Loaded, error) {
		c, err := compiler.Compile(ctx, []string{dir}, compiler.Options{})
		if err != nil {
			return nil, err
		}
		if c.Plan == nil {
			var errs []string
			for _, d := range c.Diagnostics {
				if d.Severity == dsl.Error {
					errs = append(errs, d.String())
				}
			}
			return nil, errors.New(strings.Join(errs, "\n"))
		}
		return &Loaded{Plan: c.Plan, Dir: dir, Files: c.Policy.Files, WatchDirs: []string{dir}}, nil
	})
}

// writePolicy writes policy.cue into a new temporary directory.
func writePolicy(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	return dir
}

// served is a server listening on a loopback port.
type served struct {
	srv  *Server
	url  string
	logs *rt.LogBuffer
	stop func() error
}

// startServer serves opts (Source required) on 127.0.0.1 until the test
// ends.
func startServer(t *testing.T, opts Options) *served {
	t.Helper()
	logs := &rt.LogBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	srv, err := New(context.Background(), opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(30 * time.Second):
				serveErr = errors.New("Serve did not return within 30s of its context ending")
			}
		})
		return serveErr
	}
	t.Cleanup(func() { require.NoError(t, stop()) })
	return &served{srv: srv, url: "http://" + ln.Addr().String(), logs: logs, stop: stop}
}

// do sends a request with an optional key and body and returns the status,
// the headers and the body.
// scrape returns the server's /metrics once no request is in flight: a
// request's metrics are recorded when its handler returns, which can be
// after its client has read the whole response, so a scrape right after a
// call could miss them on a loaded machine.
func scrape(t *testing.T, base string) string {
	t.Helper()
	var body string
	require.Eventually(t, func() bool {
		code, _, b := do(t, "GET", base+"/metrics", "", nil)
		body = b
		return code == http.StatusOK && strings.Contains(b, "agentc_serve_requests_in_flight 0\n")
	}, 30*time.Second, 5*time.Millisecond, "requests still in flight")
	return body
}

func do(t *testing.T, method, url, key string, body []byte, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return roundTrip(t, req)
}

// roundTrip sends req and returns the status, the headers and the body.
func roundTrip(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func sha(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}
