package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A change is reloaded once its stamps have stood still for a check: a
// file seen mid-write (its stamps move again) is not loaded half done.
func TestChangeIsDueOnceItStandsStill(t *testing.T) {
	at := func(size int64, sec int) fingerprint {
		return fingerprint{files: map[string]fileStamp{"policy.cue": {size: size, mod: time.Unix(int64(sec), 0), ok: true}}}
	}
	loaded := at(10, 1)
	var w settle
	assert.Nil(t, w.due(loaded, loaded), "nothing changed")
	assert.Nil(t, w.due(loaded, at(4, 2)), "first seen: the write may go on")
	assert.Nil(t, w.due(loaded, at(12, 3)), "it moved again")
	assert.Equal(t, []string{"policy.cue"}, w.due(loaded, at(12, 3)), "it stood still: due")
	assert.Nil(t, w.due(loaded, loaded), "back as loaded: nothing due")
	assert.Nil(t, w.due(loaded, at(12, 4)))
	assert.Nil(t, w.due(loaded, loaded), "a change undone before it settled is forgotten")
	assert.Nil(t, w.due(loaded, at(12, 4)), "seen anew: not due yet")
}

// An editor's atomic save renames a new file over the old one. With the
// same size, and the same modification time (the kernel stamps files
// from a clock that moves every few milliseconds), it is still a change.
func TestFileRenamedOverIsAChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.cue")
	require.NoError(t, os.WriteFile(path, []byte("package gw\nmodels: one: {}\n"), 0o644))
	st, err := os.Stat(path)
	require.NoError(t, err)
	loaded := takeFingerprint(nil, []string{dir})
	assert.Empty(t, loaded.changed(takeFingerprint(nil, []string{dir})))

	tmp := filepath.Join(dir, ".policy.cue.swp")
	require.NoError(t, os.WriteFile(tmp, []byte("package gw\nmodels: two: {}\n"), 0o644))
	require.NoError(t, os.Chtimes(tmp, st.ModTime(), st.ModTime()))
	require.NoError(t, os.Rename(tmp, path))
	assert.Equal(t, []string{path}, loaded.changed(takeFingerprint(nil, []string{dir})))
}

// configMapWrite updates dir as the kubelet updates a mounted ConfigMap:
// the files go into a new timestamped directory, the ..data symlink is
// swapped to it atomically, and the previous directory is removed. The
// policy file is a symlink through ..data. Its modification time is set
// to that of the file it replaces, as a clock that did not tick would.
func configMapWrite(t *testing.T, dir, stamp, src string) {
	t.Helper()
	ts := filepath.Join(dir, "..2026_12_03_"+stamp)
	require.NoError(t, os.Mkdir(ts, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ts, "policy.cue"), []byte(src), 0o644))
	prev, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")))
		require.NoError(t, os.Symlink("..data/policy.cue", filepath.Join(dir, "policy.cue")))
		return
	}
	old, err := os.Stat(filepath.Join(dir, "policy.cue"))
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(filepath.Join(ts, "policy.cue"), old.ModTime(), old.ModTime()))
	require.NoError(t, os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, prev)))
}

// A policy mounted from a ConfigMap is reloaded once per update, the
// update replacing the file behind the symlink with one of the same size.
func TestConfigMapUpdateIsReloadedOnce(t *testing.T) {
	dir := t.TempDir()
	configMapWrite(t, dir, "18_00_00.1", "package gw\nmodels: one: {}\n")
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: 10 * time.Millisecond})
	for i, name := range []string{"two", "six"} {
		configMapWrite(t, dir, fmt.Sprintf("18_0%d_00.1", i+1), "package gw\nmodels: "+name+": {}\n")
		require.Eventually(t, func() bool {
			_, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
			return strings.Contains(body, `"id":"`+name+`"`)
		}, 5*time.Second, 10*time.Millisecond, "update %d", i+1)
	}
	time.Sleep(100 * time.Millisecond) // ten checks more: no reload of its own
	metrics := scrape(t, s.url)
	assert.Contains(t, metrics, `agentc_serve_reloads_total{result="ok"} 2`)
	assert.Contains(t, metrics, `agentc_serve_reloads_total{result="failed"} 0`)
}

// A write that lands while a reload reads the files is seen: the files
// are stamped as they were when the reload began, so the rest of a file
// caught half written (that reload failing) or a second save is loaded
// next, not taken as loaded.
func TestWriteDuringReloadIsReloaded(t *testing.T) {
	for _, tc := range []struct{ name, first string }{
		{"after a failed reload", "package gw\nmodels: two: {usd_per_"},
		{"after a reload", "package gw\nmodels: two: {}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writePolicy(t, "package gw\nmodels: one: {}\n")
			path := filepath.Join(dir, "policy.cue")
			inner := cueSource(dir)
			var loads atomic.Int32
			src := SourceFunc(func(ctx context.Context) (*Loaded, error) {
				ld, err := inner.Load(ctx)
				if loads.Add(1) == 2 {
					// The rest of the write, once the files were read.
					require.NoError(t, os.WriteFile(path, []byte("package gw\nmodels: three: {}\n"), 0o644))
				}
				return ld, err
			})
			s := startServer(t, Options{Source: src, WatchInterval: 10 * time.Millisecond})
			require.NoError(t, os.WriteFile(path, []byte(tc.first), 0o644))
			require.Eventually(t, func() bool {
				_, _, body := do(t, "GET", s.url+"/v1/models", "", nil)
				return strings.Contains(body, `"id":"three"`)
			}, 5*time.Second, 10*time.Millisecond, "the write during the reload was not loaded")
		})
	}
}

// A reload waiting for a slow MCP upstream to connect does not hold the
// gateway: requests, the proxy's sessions and their calls go on with the
// generation serving.
func TestSlowUpstreamReloadDoesNotHoldRequests(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	target, err := url.Parse(upstream)
	require.NoError(t, err)
	var hold atomic.Bool
	release := make(chan struct{})
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() && r.Header.Get("Mcp-Session-Id") == "" && r.Method == http.MethodPost {
			<-release // a new session: the reload's
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		if hold.Swap(false) {
			close(release)
		}
	})
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(proxyPolicy, sha("agent-key"), slow.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", nil)
	// The client's upstream session is opened before the upstream slows
	// down: the new sessions held are the reload's.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A0"}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))

	hold.Store(true)
	reloaded := make(chan error, 1)
	go func() { reloaded <- s.srv.Reload(context.Background()) }()
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	code, _, body := do(t, "GET", s.url+"/readyz", "", nil)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "generation 1")
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, text(t, res))
	_ = connectProxy(t, s.url, "agent-key", nil)
	assert.Less(t, time.Since(start), 2*time.Second)
	select {
	case err := <-reloaded:
		t.Fatalf("the reload ended before the upstream answered: %v", err)
	default:
	}

	hold.Store(false)
	close(release)
	require.NoError(t, <-reloaded)
	_, _, body = do(t, "GET", s.url+"/readyz", "", nil)
	assert.Contains(t, body, "generation 2")
}

// TestReloadRemovingAKey: a key the new policy drops is refused from the
// first request after the reload, while a stream it opened before finishes
// on the generation it started on; a key the reload adds is admitted.
func TestReloadRemovingAKey(t *testing.T) {
	gate := make(chan struct{})
	text := transcript(t, "openai", "text.sse")
	g := newGateway(t, typicalChain, []reply{{body: text, gate: gate, holdAfter: 2}, {body: text}}, nil)
	req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions", strings.NewReader(string(chatBody("primary", "Hello", true))))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	policy := filepath.Join(g.dir, "policy.cue")
	src, err := os.ReadFile(policy)
	require.NoError(t, err)
	old := fmt.Sprintf(`keys: app: {sha256: "%s", tenant: "acme"}`, sha(clientKey))
	require.Contains(t, string(src), old)
	require.NoError(t, os.WriteFile(policy, []byte(strings.Replace(string(src), old, fmt.Sprintf(`keys: next: {sha256: "%s", tenant: "acme"}`, sha("next-key")), 1)), 0o644))
	require.NoError(t, g.srv.Reload(context.Background()))

	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, chatBody("primary", "Hello", false))
	assert.Equal(t, 401, code, body)
	assert.Contains(t, body, "unknown API key")
	code, _, body = do(t, "POST", g.url+"/v1/chat/completions", "next-key", chatBody("primary", "Hello", false))
	assert.Equal(t, 200, code, body)

	close(gate)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), "data: [DONE]", "the stream opened before the reload finishes")
}

// TestReloadsUnderThousandStreamsLeaveNoGoroutine: 1,000 streams held open
// across 50 reloads all finish, and once they have, the process runs no
// more goroutines than before them: no generation, stream or upstream
// connection leaves one behind.
func TestReloadsUnderThousandStreamsLeaveNoGoroutine(t *testing.T) {
	const n = 1000
	text := events(transcript(t, "openai", "text.sse"))
	var hold atomic.Bool
	var held atomic.Int64
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, text[0])
		w.(http.Flusher).Flush()
		if hold.Load() {
			held.Add(1)
			<-release
		}
		for _, ev := range text[1:] {
			_, _ = io.WriteString(w, ev)
		}
	}))
	s, client := streamingGateway(t, up, n)
	settle := func() {
		client.CloseIdleConnections()
		up.CloseClientConnections()
		runtime.GC()
	}
	require.Empty(t, streamHello(client, s.url))
	settle()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()

	hold.Store(true)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for range n {
		wg.Go(func() {
			if e := streamHello(client, s.url); e != "" {
				errs <- e
			}
		})
	}
	require.Eventually(t, func() bool { return held.Load() == n }, 60*time.Second, 10*time.Millisecond)
	for range 50 {
		require.NoError(t, s.srv.Reload(context.Background()))
	}
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	var now int
	assert.Eventually(t, func() bool {
		settle()
		now = runtime.NumGoroutine()
		return now <= before+5
	}, 10*time.Second, 50*time.Millisecond, "goroutines: %d before the streams, %d after", before, now)
}
