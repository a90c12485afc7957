package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// The gateway's added latency: a client streams a chat completion from a
// loopback upstream directly, and through the gateway serving the typical
// chain (tracing, meter, rate_limit, guard, fallback, retry) in front of
// the same upstream. Both run on the same machine as the client.
//
//	go test ./serve/ -run X -bench Gateway -benchtime 2000x     # one request at a time
//	AGENTC_SERVE_LOAD=1 go test ./serve/ -run TestGatewayLoad -v  # 1,000 req/s, then saturation
//
// Beside the two routes, a bare net/http reverse proxy in front of the
// same upstream measures what any HTTP hop adds on the machine.
//
// AGENTC_SERVE_LOAD_SECONDS (default 5) sets each phase's length,
// AGENTC_SERVE_LOAD_RATE (default 1000) the open-loop rate and
// AGENTC_SERVE_LOAD_WORKERS (default 32) the saturation concurrency.

// loadRig is an upstream and a gateway in front of it, with the request
// each is sent.
type loadRig struct {
	upstream, gateway, proxy string
	direct, via              []byte
	client                   *http.Client
}

// route is where a load sends its requests.
type route int

const (
	toDirect  route = iota // the upstream itself
	toGateway              // the gateway, its models on the openai provider
	toProxy                // a bare reverse proxy: the cost of any HTTP hop
)

func (r route) String() string { return [...]string{"direct", "gateway", "bare proxy"}[r] }

// upstreamConns counts the connections the upstream accepted.
var upstreamConns atomic.Int64

func newLoadRig(tb testing.TB) *loadRig {
	tb.Helper()
	evs := events(transcript(tb, "openai", "text.sse"))
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, ev := range evs {
			_, _ = io.WriteString(w, ev)
			fl.Flush()
		}
	}))
	up.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			upstreamConns.Add(1)
		}
	}
	up.Start()
	tb.Cleanup(up.Close)
	tb.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	tb.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	PoolUpstreamConnections(256) // as agentc serve does
	dir := tb.TempDir()
	if err := os.WriteFile(dir+"/policy.cue", []byte(fmt.Sprintf(gatewayPolicy, up.URL, up.URL, sha(clientKey), weatherDecl, typicalChain)), 0o644); err != nil {
		tb.Fatal(err)
	}
	serve := func() string {
		srv, err := New(context.Background(), Options{Source: cueSource(dir), WatchInterval: -1,
			// The access log is formatted as in production, and dropped.
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			tb.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = srv.Serve(ctx, ln); close(done) }()
		tb.Cleanup(func() { cancel(); <-done })
		return "http://" + ln.Addr().String() + "/v1/chat/completions"
	}
	body := func(model string) []byte {
		return []byte(`{"model":"` + model + `","stream":true,"messages":[{"role":"system","content":"You are a support agent."},{"role":"user","content":"Where is my order A1234?"}]}`)
	}
	// The floor of any gateway: net/http's reverse proxy relaying each
	// event as it arrives, with no policy, no parsing and no re-encoding.
	target, _ := url.Parse(up.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	rp.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	px := httptest.NewServer(rp)
	tb.Cleanup(px.Close)
	return &loadRig{
		upstream: up.URL + "/v1/chat/completions",
		proxy:    px.URL + "/v1/chat/completions",
		gateway:  serve(),
		direct:   body("gpt-4.1-mini"), via: body("primary"),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}},
	}
}

// call streams one completion and reads it to its end.
func (r *loadRig) call(to route) error {
	addr, body := r.upstream, r.direct
	switch to {
	case toGateway:
		addr, body = r.gateway, r.via
	case toProxy:
		addr = r.proxy
	}
	req, err := http.NewRequest("POST", addr, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n < 100 {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

func BenchmarkGateway(b *testing.B) {
	r := newLoadRig(b)
	for _, to := range []route{toDirect, toProxy, toGateway} {
		b.Run(to.String(), func(b *testing.B) {
			// The CPU time of the process (client, gateway and upstream)
			// per request holds still on a busy machine, where the time
			// per request does not.
			cpu0 := processCPU()
			for range b.N {
				if err := r.call(to); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// openLoop sends rate requests per second for d, each from its own
// goroutine on a fixed schedule (a slow response does not delay the next
// request), and returns each request's latency from its send, and how late
// the generator sent them on average.
func (r *loadRig) openLoop(to route, rate int, d time.Duration) ([]time.Duration, int, time.Duration) {
	n := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, n)
	var failed, late atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		wg.Go(func() {
			sent := time.Now()
			late.Add(int64(sent.Sub(due)))
			if err := r.call(to); err != nil {
				failed.Add(1)
			}
			lat[i] = time.Since(sent)
		})
	}
	wg.Wait()
	return lat, int(failed.Load()), time.Duration(late.Load() / int64(n))
}

// closedLoop runs workers back-to-back callers for d and returns the
// completed requests per second, and the CPU time the process (client,
// gateway and upstream together) spent per request.
func (r *loadRig) closedLoop(to route, workers int, d time.Duration) (float64, int, time.Duration) {
	var done, failed atomic.Int64
	cpu0 := processCPU()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := r.call(to); err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	cpu := (processCPU() - cpu0) / time.Duration(max(done.Load(), 1))
	return float64(done.Load()) / d.Seconds(), int(failed.Load()), cpu
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestGatewayLoad prints the added latency at a fixed rate and the
// saturation throughput. It is a measurement, not a check: it runs only
// with AGENTC_SERVE_LOAD=1.
func TestGatewayLoad(t *testing.T) {
	if os.Getenv("AGENTC_SERVE_LOAD") == "" {
		t.Skip("a load measurement: set AGENTC_SERVE_LOAD=1 to run it")
	}
	d := time.Duration(envInt("AGENTC_SERVE_LOAD_SECONDS", 5)) * time.Second
	rate := envInt("AGENTC_SERVE_LOAD_RATE", 1000)
	workers := envInt("AGENTC_SERVE_LOAD_WORKERS", 32)
	r := newLoadRig(t)
	routes := []route{toDirect, toProxy, toGateway}
	// Warm the connections, the pools and the pipelines.
	for _, to := range routes {
		r.closedLoop(to, workers, time.Second)
	}
	var p [3][4]time.Duration
	for _, to := range routes {
		lat, failed, late := r.openLoop(to, rate, d)
		if failed > 0 {
			t.Errorf("%s: %d of %d requests failed", to, failed, len(lat))
		}
		slices.Sort(lat)
		p[to] = [4]time.Duration{pct(lat, .5), pct(lat, .9), pct(lat, .99), lat[len(lat)-1]}
		t.Logf("%-12s at %d req/s: p50 %v  p90 %v  p99 %v  max %v (sent %v late on average)", to, rate, p[to][0], p[to][1], p[to][2], p[to][3], late)
	}
	for _, to := range routes[1:] {
		t.Logf("%-12s adds at %d req/s: p50 %v  p90 %v  p99 %v", to, rate, p[to][0]-p[toDirect][0], p[to][1]-p[toDirect][1], p[to][2]-p[toDirect][2])
	}
	for _, to := range routes {
		conns := upstreamConns.Load()
		tput, failed, cpu := r.closedLoop(to, workers, d)
		if failed > 0 {
			t.Errorf("%s: %d requests failed at saturation", to, failed)
		}
		t.Logf("%-12s saturation with %d workers: %.0f req/s, %v of CPU per request, %d new upstream connections", to, workers, tput, cpu, upstreamConns.Load()-conns)
	}
}

// discardWriter is a response writer that drops what it is sent.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) FlushError() error           { return nil }

// BenchmarkGatewayInProcess is the gateway's own work for one streamed
// request, without a network: decoding the body, the key, the run, the
// typical chain, and encoding ten text deltas as chunks, against a model
// that yields the deltas from memory.
func BenchmarkGatewayInProcess(b *testing.B) {
	b.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	b.Setenv("AGENTC_TEST_ANTHROPIC_KEY", anthropicKey)
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/policy.cue", []byte(fmt.Sprintf(gatewayPolicy, "http://127.0.0.1:9", "http://127.0.0.1:9", sha(clientKey), weatherDecl, typicalChain)), 0o644); err != nil {
		b.Fatal(err)
	}
	words := []string{"Hello", "!", " How", " can", " I", " help", " you", " today", "?", ""}
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for _, w := range words[:len(words)-1] {
			if !yield(runtime.Delta{Text: w}) {
				return nil
			}
		}
		yield(runtime.Delta{FinishReason: runtime.FinishStop, Usage: runtime.Usage{InputTokens: 19, OutputTokens: 10}})
		return nil
	})
	srv, err := New(context.Background(), Options{Source: cueSource(dir), WatchInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
			return map[string]runtime.ModelClient{"primary": model, "backup": model}, nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	body := []byte(`{"model":"primary","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are a support agent."},{"role":"user","content":"Where is my order A1234?"}]}`)
	b.ReportAllocs()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op") }()
	for range b.N {
		req, _ := http.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		w := &discardWriter{h: http.Header{}}
		srv.ServeHTTP(w, req)
		if w.n < 1000 {
			b.Fatalf("response of %d bytes", w.n)
		}
	}
}
