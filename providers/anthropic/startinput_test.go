package anthropic_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// An Anthropic-compatible server may give a tool call's input whole in its
// content_block_start, with no input_json_delta after it (the SDKs'
// accumulators keep it then, as the provider keeps a text block's initial
// text): the call went on with no arguments. The start's input is kept
// when no delta follows it; the deltas replace it when they come.
func TestToolUseInputGivenAtTheStartIsKept(t *testing.T) {
	body := ssetest.Transcript(t, "tool_use.sse")
	// The first call's input whole at the start, without its deltas.
	body = strings.Replace(body, `"name":"get_weather","input":{}}}`, `"name":"get_weather","input":{"location":"Lyon"}}}`, 1)
	var kept []string
	for _, e := range ssetest.Events(body) {
		if strings.Contains(e, `"index":1,"delta":{"type":"input_json_delta"`) {
			continue
		}
		kept = append(kept, e)
	}
	// The second's input at the start too, its deltas following: they win.
	body = strings.Replace(strings.Join(kept, ""), `"name":"get_weather","input":{}}}`, `"name":"get_weather","input":{"location":"Oslo"}}}`, 1)
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 2)
	assert.JSONEq(t, `{"location":"Lyon"}`, string(calls[0].Arguments))
	assert.JSONEq(t, `{"location":"Tokyo"}`, string(calls[1].Arguments))
}

// An upstream that ends its message without stopping its tool_use blocks
// (message_delta and message_stop right after their starts) lost the
// inputs the starts gave, which were sent when the block stopped: the
// SDKs' accumulators keep them, and the call went on with no arguments.
// What the starts gave goes out when the stream ends, in block order, and
// so it does when the stream is cut: it arrived, as text that did.
func TestToolUseInputGivenAtTheStartOfABlockNeverStoppedIsKept(t *testing.T) {
	for _, end := range []string{"message_stop", "cut"} {
		body := ssetest.Transcript(t, "tool_use.sse")
		body = strings.Replace(body, `"name":"get_weather","input":{}}}`, `"name":"get_weather","input":{"location":"Lyon"}}}`, 1)
		body = strings.Replace(body, `"name":"get_weather","input":{}}}`, `"name":"get_weather","input":{"location":"Oslo"}}}`, 1)
		var kept []string
		for _, e := range ssetest.Events(body) {
			if strings.Contains(e, `"delta":{"type":"input_json_delta"`) || strings.Contains(e, `"type":"content_block_stop"`) ||
				end == "cut" && strings.Contains(e, `"type":"message_`) && !strings.Contains(e, `"type":"message_start"`) {
				continue
			}
			kept = append(kept, e)
		}
		s := ssetest.New(t, ssetest.Reply{Body: strings.Join(kept, "")})
		ds, err := ssetest.Collect(t, client(t, s), hi())
		if end == "cut" {
			require.Error(t, err, end)
		} else {
			require.NoError(t, err, end)
		}
		calls := ssetest.ToolCalls(ds)
		require.Len(t, calls, 2, end)
		assert.JSONEq(t, `{"location":"Lyon"}`, string(calls[0].Arguments), end)
		assert.JSONEq(t, `{"location":"Oslo"}`, string(calls[1].Arguments), end)
	}
}
