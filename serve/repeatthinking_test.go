package serve

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// anBlocksSSE is an Anthropic stream of blocks in their order: a thinking
// block ("thinking:TEXT", signed), a redacted one ("redacted"), a text
// ("text:TEXT") or a tool_use ("tool:ID:NAME:ARGS"), ending on tool_use.
func anBlocksSSE(blocks ...string) string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	out := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	for i, b := range blocks {
		at := strconv.Itoa(i)
		kind, rest, _ := strings.Cut(b, ":")
		switch kind {
		case "thinking":
			out += ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"thinking_delta","thinking":`+q(rest)+`}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"signature_delta","signature":"sig`+at+`"}}`)
		case "redacted":
			out += ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"redacted_thinking","data":"enc`+at+`"}}`)
		case "text":
			out += ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"text","text":""}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"text_delta","text":`+q(rest)+`}}`)
		case "tool":
			parts := strings.SplitN(rest, ":", 3)
			out += ev("content_block_start", `{"type":"content_block_start","index":`+at+`,"content_block":{"type":"tool_use","id":`+q(parts[0])+`,"name":`+q(parts[1])+`,"input":{}}}`) +
				ev("content_block_delta", `{"type":"content_block_delta","index":`+at+`,"delta":{"type":"input_json_delta","partial_json":`+q(parts[2])+`}}`)
		}
		out += ev("content_block_stop", `{"type":"content_block_stop","index":`+at+`}`)
	}
	return out + ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
}

// thinkingAsks sends one request for a Claude model with thinking on, on
// the Messages and Responses routes, whole and streamed, and returns the
// status and body of each.
func thinkingAsks(t *testing.T, g *gateway) map[string][2]string {
	t.Helper()
	tools := `[{"name": "refund", "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}}}]`
	rsTools := `[{"type": "function", "name": "refund", "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}}}]`
	out := map[string][2]string{}
	for _, stream := range []bool{false, true} {
		s := strconv.FormatBool(stream)
		code, _, body := do(t, "POST", g.url+"/v1/messages", clientKey, []byte(`{"model": "backup", "max_tokens": 4096, "stream": `+s+
			`, "thinking": {"type": "enabled", "budget_tokens": 2048}, "tools": `+tools+`, "messages": [{"role": "user", "content": "refund"}]}`),
			"anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
		out["messages stream="+s] = [2]string{strconv.Itoa(code), body}
		code, _, body = do(t, "POST", g.url+"/v1/responses", clientKey, []byte(`{"model": "backup", "stream": `+s+
			`, "tools": `+rsTools+`, "input": "refund"}`))
		out["responses stream="+s] = [2]string{strconv.Itoa(code), body}
	}
	return out
}

// TestRepeatBeforeSignedThinkingFailsTheAnswer: a repeated refund left
// out of an answer of interleaved thinking, with a thinking block after
// it, was relayed without it, though the block's signature covers what
// came before it: the client, sending the turn back with its tool result,
// had the provider refuse it. Such an answer can neither be relayed
// without the repeat nor with it (the client would run the refund twice):
// it fails as the upstream's unusable answer, a 502 the client may retry,
// or the API's error event in a stream, before any call of it is relayed.
// A repeat after the answer's last thinking block is still left out.
func TestRepeatBeforeSignedThinkingFailsTheAnswer(t *testing.T) {
	for _, after := range []string{"thinking:Done with the refund.", "redacted"} {
		t.Run(after, func(t *testing.T) {
			sse := anBlocksSSE("thinking:Refund 5.", "tool:toolu_a:refund:{\"amount\":5}", "tool:toolu_b:refund:{\"amount\":5}", after, "text:Done.")
			g := newGatewayWith(t, repeatDecls, `{use: "tracing"}`, nil, []reply{{body: sse}, {body: sse}, {body: sse}, {body: sse}})
			for route, got := range thinkingAsks(t, g) {
				if strings.HasSuffix(route, "false") {
					assert.Equal(t, "502", got[0], route+": "+got[1])
				}
				assert.Contains(t, got[1], "before a thinking block", route)
				assert.NotContains(t, got[1], `"toolu_a"`, route, "no call of the answer is relayed")
			}
			assert.NotContains(t, g.metrics(t), "agentc_serve_repeated_calls_dropped_total{")
		})
	}
	t.Run("repeat after the last thinking block", func(t *testing.T) {
		sse := anBlocksSSE("thinking:Refund 5.", "tool:toolu_a:refund:{\"amount\":5}", "thinking:Once more.", "tool:toolu_b:refund:{\"amount\":5}", "text:Done.")
		g := newGatewayWith(t, repeatDecls, `{use: "tracing"}`, nil, []reply{{body: sse}, {body: sse}, {body: sse}, {body: sse}})
		for route, got := range thinkingAsks(t, g) {
			require.Equal(t, "200", got[0], route+": "+got[1])
			assert.Contains(t, got[1], "toolu_a", route)
			assert.NotContains(t, got[1], "toolu_b", route)
			assert.Contains(t, got[1], "sig2", route)
		}
		assert.Contains(t, g.metrics(t), `agentc_serve_repeated_calls_dropped_total{tool="refund"} 4`)
	})
}
