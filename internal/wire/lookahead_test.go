package wire_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// A delta is marked More when the next one was decoded with it and carries
// the same part; the last text before the tool calls, and the last delta
// before a read of the body or the end, go out unmarked.
func TestLookaheadMarksDeltasFollowedInTheSamePart(t *testing.T) {
	var got []runtime.Delta
	la := wire.NewLookahead(io.NopCloser(strings.NewReader("more")), func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	})
	call := func(args string) runtime.Delta {
		return runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: args}}}
	}
	thinking := runtime.Delta{Thinking: &runtime.ThinkingDelta{Text: "hm"}}
	for _, d := range []runtime.Delta{thinking, {Text: "a"}, {Text: "b"}, call(`{"x"`), call(`:1}`)} {
		require.True(t, la.Yield(d))
	}
	// The decoder reads the body again: the held delta goes out first.
	b := make([]byte, 8)
	n, err := la.Body().Read(b)
	require.NoError(t, err)
	assert.Equal(t, "more", string(b[:n]))
	require.True(t, la.Yield(runtime.Delta{FinishReason: "tool_calls"}))
	require.True(t, la.Flush())

	var more []bool
	for _, d := range got {
		more = append(more, d.More)
	}
	assert.Equal(t, []bool{false, true, false, true, false, false}, more,
		"thinking->text: not marked; text->text: marked; text->tool call: not marked; tool->tool: marked; before a read: not marked; the end: not marked")
}
