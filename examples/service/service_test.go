package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// start serves the committed plan.json on a loopback port.
func start(t *testing.T) *httptest.Server {
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
	return ts
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
		{"unregistered tool", "delete_everything", map[string]any{}, http.StatusBadGateway, `is not registered`},
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
