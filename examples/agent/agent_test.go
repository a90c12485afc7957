package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// fakeOpenAI is an OpenAI-compatible server on loopback that answers each
// chat completion with the next scripted turn, streamed in the API's wire
// format, and records the requests.
type fakeOpenAI struct {
	mu     sync.Mutex
	script []func(w io.Writer)
	bodies []map[string]any
}

func chunk(w io.Writer, delta string, finish string) {
	f := "null"
	if finish != "" {
		f = fmt.Sprintf("%q", finish)
	}
	fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"fake","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, f)
}

func usage(w io.Writer, in, out int) {
	fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"fake","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n", in, out, in+out)
}

// toolCall streams one tool call whose arguments arrive in two fragments.
func toolCall(id, name, args string) func(io.Writer) {
	return func(w io.Writer) {
		chunk(w, fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`, id, name), "")
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			b, _ := json.Marshal(part)
			chunk(w, fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, b), "")
		}
		chunk(w, `{}`, "tool_calls")
		usage(w, 120, 20)
	}
}

func answer(words ...string) func(io.Writer) {
	return func(w io.Writer) {
		chunk(w, `{"role":"assistant","content":""}`, "")
		for _, s := range words {
			b, _ := json.Marshal(s)
			chunk(w, fmt.Sprintf(`{"content":%s}`, b), "")
		}
		chunk(w, `{}`, "stop")
		usage(w, 200, 15)
	}
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" || n >= len(f.script) {
		http.Error(w, `{"error":{"message":"unexpected request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var buf bytes.Buffer
	f.script[n](&buf)
	for _, ev := range strings.SplitAfter(buf.String(), "\n\n") {
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

func TestAgentRefusedRefundReachesTheModel(t *testing.T) {
	fake := &fakeOpenAI{script: []func(io.Writer){
		toolCall("call_1", "lookup_order", `{"order_id":"B200"}`),
		toolCall("call_2", "refund", `{"order_id":"B200","amount":250}`),
		answer("I can't refund", " 250 EUR without", " an approver."),
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client, err := openai.New(openai.Config{Model: "fake", BaseURL: srv.URL + "/v1"})
	require.NoError(t, err)

	var out strings.Builder
	res, err := run(context.Background(), ".", "Please refund order B200.", map[string]runtime.ModelClient{"primary": client}, &out)
	require.NoError(t, err)
	assert.Equal(t, "I can't refund 250 EUR without an approver.\n", out.String())
	assert.Equal(t, 3, res.Steps)
	assert.Equal(t, 2, res.ToolCalls)
	assert.Equal(t, 1, res.Blocked)
	assert.Equal(t, runtime.StopDone, res.Stop)
	assert.Equal(t, runtime.Usage{InputTokens: 440, OutputTokens: 55}, res.Usage)

	require.Len(t, fake.bodies, 3)
	tools := fake.bodies[0]["tools"].([]any)
	require.Len(t, tools, 2, "the policy's tools are offered")
	msgs := fake.bodies[2]["messages"].([]any)
	lookup := msgs[3].(map[string]any)
	assert.Equal(t, "tool", lookup["role"])
	assert.JSONEq(t, `{"amount":250,"currency":"EUR","status":"delivered"}`, lookup["content"].(string))
	refusal := msgs[5].(map[string]any)
	assert.Equal(t, "call_2", refusal["tool_call_id"])
	assert.Equal(t, "refused: the call was blocked by policy (refund_limit): refunds over 100 need an approver. Do not repeat it unchanged.", refusal["content"])
}

// TestRefundOfAnAmountNotAFloat: an integer amount above 2^53 reaches a
// tool as an int64 (runtime.DecodeArgs); the refund read it as 0 and
// recorded a refund of 0. It is refused now.
func TestRefundOfAnAmountNotAFloat(t *testing.T) {
	s := &shop{refunds: map[string]float64{}}
	call := runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "B200", "amount": int64(9007199254740993), "approved_by": "lee"}}
	_, err := s.tools()["refund"](context.Background(), &call)
	require.Error(t, err)
	assert.Empty(t, s.refunds)
}
