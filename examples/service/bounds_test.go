package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// startCounting serves the committed plan with the demo deps, its refund
// counting the refunds it makes in refunds.
func startCounting(t *testing.T, refunds *atomic.Int64) (*Server, *httptest.Server) {
	t.Helper()
	p, err := plan.Load("plan.json")
	require.NoError(t, err)
	deps := DemoDeps(slog.New(slog.NewTextHandler(io.Discard, nil)))
	refund := deps.Tools["refund"]
	deps.Tools["refund"] = func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		refunds.Add(1)
		return refund(ctx, c)
	}
	srv, err := NewServer(context.Background(), p, deps)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		assert.NoError(t, srv.Close())
	})
	return srv, ts
}

// postRaw posts body as it is, with the headers given as name, value pairs.
func postRaw(t *testing.T, ts *httptest.Server, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(out)
}

// TestDuplicateRefundIsDeduped: a refund sent again with the same
// Idempotency-Key is answered from the first one's record, as the package
// comment says, and not made again; so is one sent again in the same run
// with the same arguments. Another key, or another run, is another refund.
func TestDuplicateRefundIsDeduped(t *testing.T) {
	var refunds atomic.Int64
	_, ts := startCounting(t, &refunds)
	body := `{"args":{"order_id":"A1","amount":50}}`
	resp, first := postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r1", "Idempotency-Key", "k2")
	require.Equal(t, http.StatusOK, resp.StatusCode, first)
	assert.Contains(t, first, `"deduped":false`)
	resp, again := postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r1", "Idempotency-Key", "k2")
	require.Equal(t, http.StatusOK, resp.StatusCode, again)
	assert.Contains(t, again, `"deduped":true`)
	assert.Contains(t, again, `"idempotency_key":"k2"`)
	assert.EqualValues(t, 1, refunds.Load(), "the duplicate is not refunded again")

	resp, _ = postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r1", "Idempotency-Key", "k3")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 2, refunds.Load(), "another key is another refund")

	for range 2 {
		resp, out := postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r2")
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
	}
	assert.EqualValues(t, 3, refunds.Load(), "the same refund twice in one run is made once")
	resp, _ = postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r3")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 4, refunds.Load(), "another run's refund is its own")
}

// TestRunIDTooLongIsABadRequest: a run id over runtime.MaxRunIDBytes is
// the client's error, 400, not a 502.
func TestRunIDTooLongIsABadRequest(t *testing.T) {
	ts := start(t)
	resp, body := postRaw(t, ts, "/v1/tools/lookup_order", `{"args":{"order_id":"A1"}}`,
		"X-Run-ID", strings.Repeat("r", runtime.MaxRunIDBytes+1))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.Contains(t, body, "the run id is 1025 bytes long; at most 1024")
	resp, body = postRaw(t, ts, "/v1/tools/lookup_order", `{"args":{"order_id":"A1"}}`,
		"X-Run-ID", strings.Repeat("r", runtime.MaxRunIDBytes))
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestTrailingDataIsRefused: a body with anything but white space after
// its JSON value is malformed (400), and the call is not made.
func TestTrailingDataIsRefused(t *testing.T) {
	var refunds atomic.Int64
	_, ts := startCounting(t, &refunds)
	for _, body := range []string{
		`{"args":{"order_id":"A1","amount":5}} {"args":"garbage"`,
		`{"args":{"order_id":"A1","amount":5}}{}`,
		`{"args":{"order_id":"A1","amount":5}} x`,
	} {
		resp, out := postRaw(t, ts, "/v1/tools/refund", body, "X-Run-ID", "r")
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", body, out)
		assert.Contains(t, out, `"kind":"bad_request"`)
	}
	assert.Zero(t, refunds.Load())
	resp, out := postRaw(t, ts, "/v1/tools/refund", "{\"args\":{\"order_id\":\"A1\",\"amount\":5}}\n\t ", "X-Run-ID", "r")
	assert.Equal(t, http.StatusOK, resp.StatusCode, out)
}

// TestOpenRunsAreBounded: past the bound, a request naming a new run is
// refused with 503 and Retry-After, while the open runs go on; a run ended
// frees its place, and so do runs idle for run_idle.
func TestOpenRunsAreBounded(t *testing.T) {
	srv, ts := startServer(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	srv.runs.max = 2
	srv.runs.now = func() time.Time { return now }
	assert.Equal(t, 15*time.Minute, srv.runs.idle, "policy.cue's run_idle")
	lookup := `{"args":{"order_id":"A1"}}`
	for _, run := range []string{"a", "b"} {
		resp, out := postRaw(t, ts, "/v1/tools/lookup_order", lookup, "X-Run-ID", run)
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
	}
	resp, out := postRaw(t, ts, "/v1/tools/lookup_order", lookup, "X-Run-ID", "c")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, out)
	assert.Contains(t, out, `"kind":"too_many_runs"`)
	assert.Contains(t, out, "at most 2 open runs")
	assert.Equal(t, "900", resp.Header.Get("Retry-After"), "the first open run is idle for run_idle in 15 minutes")
	resp, out = postRaw(t, ts, "/v1/tools/lookup_order", lookup, "X-Run-ID", "a")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "an open run goes on: %s", out)

	resp, _ = postRaw(t, ts, "/v1/runs/a/end", "")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, out = postRaw(t, ts, "/v1/tools/lookup_order", lookup, "X-Run-ID", "c")
	require.Equal(t, http.StatusOK, resp.StatusCode, "an ended run frees its place: %s", out)
	assert.Equal(t, 2, srv.runs.count())

	now = now.Add(15 * time.Minute)
	resp, out = postRaw(t, ts, "/v1/tools/lookup_order", lookup, "X-Run-ID", "d")
	require.Equal(t, http.StatusOK, resp.StatusCode, "runs idle for run_idle are forgotten: %s", out)
	assert.Equal(t, 1, srv.runs.count())
}
