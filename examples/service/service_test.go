package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/netutil"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/serve"
)

// start serves the committed plan.json on a loopback port.
func start(t *testing.T) *httptest.Server {
	t.Helper()
	_, ts := startServer(t)
	return ts
}

// startServer is start that also returns the server, to look at its pipeline.
func startServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	p, err := plan.Load("plan.json")
	require.NoError(t, err, "the committed plan must validate")
	srv, err := NewServer(context.Background(), p, DemoDeps(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	ts := httptest.NewServer(srv) // listens on 127.0.0.1
	require.True(t, strings.HasPrefix(ts.URL, "http://127.0.0.1:"), ts.URL)
	t.Cleanup(func() {
		ts.Close()
		assert.NoError(t, srv.Close())
	})
	return srv, ts
}

func post(t *testing.T, ts *httptest.Server, path, run string, body any) (*http.Response, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, ts.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("X-Run-ID", run)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

func ndjson(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	return out
}

func chatBody(text string) map[string]any {
	return map[string]any{"model": "primary", "messages": []map[string]string{{"role": "user", "content": text}}}
}

func TestChatStreamsThroughThePipeline(t *testing.T) {
	ts := start(t)
	resp, body := post(t, ts, "/v1/chat", "run-chat", chatBody("hello there world"))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	lines := ndjson(t, body)
	require.Len(t, lines, 4)
	assert.Equal(t, "hello", lines[0]["delta"])
	assert.Equal(t, " world", lines[2]["delta"])
	done := lines[3]["done"].(map[string]any)
	assert.Equal(t, "primary", done["model"])
	assert.Equal(t, float64(1), done["attempts"])

	// The primary fails: retry gives up after three attempts, fallback
	// serves from the backup.
	_, body = post(t, ts, "/v1/chat", "run-chat", chatBody("please fail primary"))
	lines = ndjson(t, body)
	require.NotEmpty(t, lines)
	assert.Equal(t, "backup", lines[len(lines)-1]["done"].(map[string]any)["model"])
}

func TestChatBudgetAndGuards(t *testing.T) {
	ts := start(t)
	// max_tokens refuses an oversized input before any model runs.
	resp, body := post(t, ts, "/v1/chat", "run-big", chatBody(strings.Repeat("word ", 5000)))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(body), `"kind":"blocked"`)
	assert.Contains(t, string(body), `"layer":"max_tokens"`)

	// The run's budget is 0.01 USD: about 2500 input tokens at 3/Mtok each
	// call, so a few calls exhaust it and the next is refused with 402.
	long := strings.Repeat("spend ", 2500)
	var status int
	for range 10 {
		resp, body = post(t, ts, "/v1/chat", "run-budget", chatBody(long))
		status = resp.StatusCode
		if status != http.StatusOK {
			break
		}
	}
	assert.Equal(t, http.StatusPaymentRequired, status)
	assert.Contains(t, string(body), `"kind":"budget"`)
	assert.Contains(t, string(body), `"layer":"meter"`)

	// Another run has its own ledger.
	resp, _ = post(t, ts, "/v1/chat", "run-other", chatBody("hi"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestTools(t *testing.T) {
	ts := start(t)
	tests := []struct {
		name       string
		tool       string
		args       map[string]any
		wantStatus int
		want       string
	}{
		{"lookup", "lookup_order", map[string]any{"order_id": "A1"}, http.StatusOK, `"total":42.5`},
		{"small refund", "refund", map[string]any{"order_id": "A1", "amount": 40}, http.StatusOK, `"refunded":40`},
		{"large refund blocked", "refund", map[string]any{"order_id": "B7", "amount": 250}, http.StatusForbidden, `"layer":"refund_limit"`},
		{"large approved refund", "refund", map[string]any{"order_id": "B7", "amount": 250, "approved_by": "lee"}, http.StatusOK, `"refunded":250`},
		{"unknown order fails permanently", "lookup_order", map[string]any{"order_id": "Z9"}, http.StatusBadGateway, `"kind":"permanent"`},
		{"undeclared tool refused", "delete_everything", map[string]any{}, http.StatusForbidden, `is not declared in the policy's tools`},
		{"refund without its order_id refused", "refund", map[string]any{"amount": 5}, http.StatusForbidden, `missing properties: 'order_id'`},
		{"over-long order id refused", "lookup_order", map[string]any{"order_id": strings.Repeat("x", 65)}, http.StatusForbidden, `args.order_id: length must be \u003c= 64, but got 65`},
		// 100.0000000000000000001 was decoded as 100, which passed the
		// guard on amounts over 100.
		{"amount float64 cannot hold refused", "refund", map[string]any{"order_id": "B7", "amount": json.RawMessage(`100.0000000000000000001`)}, http.StatusForbidden, `args.amount: 100.0000000000000000001`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, ts, "/v1/tools/"+tt.tool, "run-tools", map[string]any{"args": tt.args})
			assert.Equal(t, tt.wantStatus, resp.StatusCode, string(body))
			assert.Contains(t, string(body), tt.want)
		})
	}
}

func TestTurnRateLimitAndAdmit(t *testing.T) {
	ts := start(t)
	resp, body := post(t, ts, "/v1/turn", "run-turn", map[string]any{"input": "good morning"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.JSONEq(t, `{"output":"good morning"}`, string(body))
	// The turn chain's bucket holds five turns (burst 5): the rest are
	// rejected with 429 until it refills.
	var last int
	for range 6 {
		resp, _ = post(t, ts, "/v1/turn", "run-turn", map[string]any{"input": "again"})
		last = resp.StatusCode
	}
	assert.Equal(t, http.StatusTooManyRequests, last)

	resp, body = post(t, ts, "/v1/admit", "", map[string]any{"items": []map[string]any{
		{"content": "fact", "source": "kb", "score": 0.9, "metadata": map[string]any{"tier": "verified"}},
		{"content": "guess", "source": "kb", "score": 0.8, "metadata": map[string]any{"tier": "inferred"}},
	}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct {
		Admitted []struct{ Content string } `json:"admitted"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Admitted, 1)
	assert.Equal(t, "fact", got.Admitted[0].Content)
}

func TestBadRequest(t *testing.T) {
	ts := start(t)
	resp, body := post(t, ts, "/v1/chat", "r", map[string]any{"modle": "x"})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "unknown field")
	resp, body = post(t, ts, "/v1/tools/refund", "r", map[string]any{"args": []int{1}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "args: ")
}

func TestEndRunDropsTheRunsLedger(t *testing.T) {
	ts := start(t)
	long := strings.Repeat("spend ", 2500)
	status := http.StatusOK
	for i := 0; i < 10 && status == http.StatusOK; i++ {
		resp, _ := post(t, ts, "/v1/chat", "run-end", chatBody(long))
		status = resp.StatusCode
	}
	require.Equal(t, http.StatusPaymentRequired, status)

	resp, _ := post(t, ts, "/v1/runs/run-end/end", "", nil)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = post(t, ts, "/v1/chat", "run-end", chatBody("hi"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the ended run's ledger is gone")
}

// toolCallsOf returns the calls the tool chain's meter counted for run.
func toolCallsOf(t *testing.T, srv *Server, run string) int64 {
	t.Helper()
	for _, l := range srv.pl.Layers("tool") {
		if lr, ok := l.Middleware.(runtime.LedgerReader); ok {
			return lr.Ledger(run).Calls
		}
	}
	t.Fatal("no meter on the tool chain")
	return 0
}

// TestAnonymousRequestsAreRunsOfTheirOwn: requests without X-Run-ID do not
// share one run (and one meter ledger, whose 100-call ceiling would refuse
// every anonymous client after the hundredth call); each gets a generated id,
// returned in X-Run-ID, whose state is dropped when the request ends.
func TestAnonymousRequestsAreRunsOfTheirOwn(t *testing.T) {
	srv, ts := startServer(t)
	seen := map[string]bool{}
	for i := range 105 {
		resp, body := post(t, ts, "/v1/tools/lookup_order", "", map[string]any{"args": map[string]any{"order_id": "A1"}})
		require.Equal(t, http.StatusOK, resp.StatusCode, "call %d: %s", i+1, body)
		id := resp.Header.Get("X-Run-ID")
		require.NotEmpty(t, id)
		assert.False(t, seen[id], "run id %q reused", id)
		seen[id] = true
		assert.Zero(t, toolCallsOf(t, srv, id), "the generated run's ledger is dropped when the request ends")
	}
	assert.Zero(t, toolCallsOf(t, srv, ""))

	// A named run keeps its state across requests and is not echoed.
	resp, _ := post(t, ts, "/v1/tools/lookup_order", "run-named", map[string]any{"args": map[string]any{"order_id": "A1"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("X-Run-ID"))
	assert.Equal(t, int64(1), toolCallsOf(t, srv, "run-named"))
}

func TestErrorStatusAndRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		retryAfter string
	}{
		{"blocked", &runtime.BlockedError{Layer: "g", Message: "no"}, http.StatusForbidden, ""},
		{"budget", &runtime.BudgetError{Layer: "m", Resource: "calls"}, http.StatusPaymentRequired, ""},
		{"rate limited, rounded up", &runtime.CallError{Kind: runtime.KindRateLimited, RetryAfter: 1500 * time.Millisecond}, http.StatusTooManyRequests, "2"},
		{"rate limited without a delay", &runtime.CallError{Kind: runtime.KindRateLimited}, http.StatusTooManyRequests, "1"},
		{"upstream 429", &runtime.CallError{Status: 429}, http.StatusTooManyRequests, "1"},
		{"breaker open", &runtime.BreakerOpenError{Layer: "retry", Key: "primary", Until: time.Now().Add(30 * time.Second)},
			http.StatusServiceUnavailable, "30"},
		{"other failure", errors.New("boom"), http.StatusBadGateway, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeError(w, httptest.NewRequest(http.MethodPost, "/v1/chat", nil), tt.err, nil)
			assert.Equal(t, tt.wantStatus, w.Code)
			assert.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"))
			assert.Contains(t, w.Body.String(), `"error"`)
		})
	}

	t.Run("client went away", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := httptest.NewRecorder()
		writeError(w, httptest.NewRequest(http.MethodPost, "/v1/chat", nil).WithContext(ctx), context.Canceled, nil)
		assert.Equal(t, serve.StatusClientClosedRequest, w.Code)
		assert.Empty(t, w.Body.String())
	})
}

// TestRunShutsDownBeforeClosing: run returns once its context ends, after
// the server shut down, and returns a listen failure instead of exiting.
func TestRunShutsDownBeforeClosing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, "plan.json", addr) }()
	// Wait until it serves, then end it.
	require.Eventually(t, func() bool {
		resp, err := http.Post("http://"+addr+"/v1/admit", "application/json", strings.NewReader(`{"items":[]}`))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}

	err = run(context.Background(), "plan.json", "127.0.0.1:-1")
	require.Error(t, err, "a listen failure is returned")
}

// A client that trickles its body is cut off at the read deadline, and the
// connections it holds never stop others from being served.
func TestSlowBodiesAreCutOff(t *testing.T) {
	p, err := plan.Load("plan.json")
	require.NoError(t, err)
	srv, err := NewServer(context.Background(), p, DemoDeps(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer srv.Close()
	lim := limits{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Idle: time.Second, MaxHeaderBytes: 8 << 10, MaxConns: 64}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := newHTTPServer(srv, lim)
	go func() { _ = hs.Serve(netutil.LimitListener(ln, lim.MaxConns)) }()
	defer hs.Close()
	addr := ln.Addr().String()

	const slow = 40
	closed := make(chan time.Duration, slow)
	for range slow {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "POST /v1/admit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		require.NoError(t, err)
		go func() {
			start := time.Now()
			stop := make(chan struct{})
			go func() { // one byte every 100 ms, until the server hangs up
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
						if _, err := c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, c) // returns when the server closes the connection
			close(stop)
			closed <- time.Since(start)
		}()
	}
	// Others are served meanwhile.
	resp, err := http.Post("http://"+addr+"/v1/admit", "application/json", strings.NewReader(`{"items":[]}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for range slow {
		select {
		case d := <-closed:
			assert.Less(t, d, 3*time.Second, "a trickling client is cut off near the read deadline")
		case <-time.After(6 * time.Second):
			t.Fatal("a trickling client kept its connection")
		}
	}
}

// A short load test: 500 concurrent requests of every kind a hostile or
// broken client sends (well-formed chats, malformed JSON, bodies over the
// limit, slow headers) against the bounded server. Each gets its status,
// the server keeps serving, and the goroutines and live heap come back.
func TestLoadWithHostileRequests(t *testing.T) {
	p, err := plan.Load("plan.json")
	require.NoError(t, err)
	srv, err := NewServer(context.Background(), p, DemoDeps(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer srv.Close()
	// Bounds short enough for the test, long enough that a loaded machine
	// still sends a well-formed request in time.
	lim := limits{ReadHeader: time.Second, Read: 3 * time.Second, Idle: time.Second, MaxHeaderBytes: 16 << 10, MaxConns: 256}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := newHTTPServer(srv, lim)
	go func() { _ = hs.Serve(netutil.LimitListener(ln, lim.MaxConns)) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	// A connection per request: a reused keep-alive connection can meet the
	// server closing it at its idle timeout, which no POST survives.
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	goruntime.GC()
	var before goruntime.MemStats
	goruntime.ReadMemStats(&before)
	goroutines := goruntime.NumGoroutine()

	big := `{"model":"primary","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`
	kinds := []struct {
		name string
		body string
		want int
	}{
		{"chat", `{"model":"primary","messages":[{"role":"user","content":"hello there"}]}`, http.StatusOK},
		{"malformed", `{"model": "primary", "messages": [`, http.StatusBadRequest},
		{"unknown field", `{"modle":"primary"}`, http.StatusBadRequest},
	}
	const n = 500
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]map[int]int{}
	for i := range n {
		wg.Go(func() {
			if i%25 == 24 { // over the limit: 413, or the server hangs up mid-body
				resp, err := client.Post(url+"/v1/chat", "application/json", strings.NewReader(big))
				if err == nil {
					_ = resp.Body.Close()
					assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
				}
				return
			}
			if i%10 == 9 { // slow headers: the server hangs up at ReadHeader
				c, err := net.Dial("tcp", ln.Addr().String())
				if !assert.NoError(t, err) {
					return
				}
				defer c.Close()
				_, _ = c.Write([]byte("POST /v1/chat HTTP/1.1\r\nHost: x\r\n"))
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				start := time.Now()
				_, _ = io.Copy(io.Discard, c)
				assert.Less(t, time.Since(start), 5*time.Second, "a slow header is cut off")
				return
			}
			k := kinds[i%len(kinds)]
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat", strings.NewReader(k.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if !assert.NoError(t, err, k.name) {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			if got[k.name] == nil {
				got[k.name] = map[int]int{}
			}
			got[k.name][resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, k := range kinds {
		assert.Len(t, got[k.name], 1, "%s: one status for all: %v", k.name, got[k.name])
		assert.Positive(t, got[k.name][k.want], "%s: want %d, got %v", k.name, k.want, got[k.name])
	}
	// Still serving.
	resp, err := client.Post(url+"/v1/admit", "application/json", strings.NewReader(`{"items":[]}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	client.CloseIdleConnections()
	require.Eventually(t, func() bool { return goruntime.NumGoroutine() <= goroutines+10 }, 10*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", goroutines, goruntime.NumGoroutine())
	goruntime.GC()
	var after goruntime.MemStats
	goruntime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("live heap grew %d KiB over %d requests", growth>>10, n)
	assert.Less(t, growth, int64(32<<20), "live heap growth")
}
