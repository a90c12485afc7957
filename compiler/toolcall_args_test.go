package compiler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A misspelt argument is reported at the argument, not at the first place
// its name occurs after the call's variable: a in c.args.a is not the a of
// args.
func TestToolCallArgReadsOffsetIsTheKey(t *testing.T) {
	for _, src := range []string{
		"response.tool_calls.exists(c, c.name == 'x' && c.args.a > 1.0)",
		"response.tool_calls.exists(c, c.name == 'x' && c.args['a'] > 1.0)",
		"response.tool_calls.exists(c, c.name == 'x' && has(c.args.s))",
		"response.tool_calls.exists(c, c.name == 'x' && c.args.r > 1.0)",
	} {
		reads := toolCallArgReads(src)
		require.Len(t, reads, 1, src)
		r := reads[0]
		require.Less(t, r.offset, len(src), src)
		assert.Equal(t, r.key, src[r.offset:r.offset+len(r.key)], src)
		assert.Greater(t, r.offset, len("response.tool_calls.exists(c, c.name == 'x' && c.args"), src)
	}
}

// A variable named args is passed over: the key is the one after its
// .args selector.
func TestToolCallArgReadsOffsetPastAVariableArgs(t *testing.T) {
	src := "response.tool_calls.exists(args, args.name == 'x' && args.args.s > 1.0)"
	reads := toolCallArgReads(src)
	require.Len(t, reads, 1)
	assert.Equal(t, strings.LastIndex(src, ".s")+1, reads[0].offset)
}

// An element of the proposed calls read by index is a tool call as a
// macro's variable is: a name test of the same element narrows its reads
// (through &&, an in list, a conditional), one of another element does
// not, and an element of a filter() is narrowed by its condition.
func TestToolCallArgReadsIndexNarrowing(t *testing.T) {
	for _, c := range []struct {
		src     string
		tools   []string
		history bool
	}{
		{src: "response.tool_calls[0].args.amout > 100.0"},
		{src: "has(response.tool_calls[0].args.amout)"},
		{src: "size(response.tool_calls) > 0 && response.tool_calls[0].name == 'refund' && response.tool_calls[0].args.amout > 100.0", tools: []string{"refund"}},
		{src: "response.tool_calls[0].name in ['refund', 'transfer'] && response.tool_calls[0].args['amout'] > 100.0", tools: []string{"refund", "transfer"}},
		{src: "response.tool_calls[0].name == 'refund' ? response.tool_calls[0].args.amout > 100.0 : false", tools: []string{"refund"}},
		{src: "response.tool_calls[0].name != 'refund' || response.tool_calls[0].args.amout < 100.0", tools: []string{"refund"}},
		{src: "response.tool_calls[0u].name == 'refund' && response.tool_calls[0u].args.amout > 1.0", tools: []string{"refund"}},
		{src: "response.tool_calls[1].name == 'refund' && response.tool_calls[0].args.amout > 1.0"},
		{src: "response.tool_calls[0].name == 'refund' && 'amout' in response.tool_calls[0].args", tools: []string{"refund"}},
		{src: "response.tool_calls.exists(c, c.name == 'refund' && 'amout' in c.args)", tools: []string{"refund"}},
		{src: "response.tool_calls.filter(c, c.name == 'refund')[0].args.amout > 1.0", tools: []string{"refund"}},
		{src: "request.messages[0].tool_calls[0].name == 'refund' && request.messages[0].tool_calls[0].args.amout > 1.0", tools: []string{"refund"}, history: true},
		{src: "request.messages.exists(m, m.tool_calls[0].name == 'refund' && m.tool_calls[0].args.amout > 1.0)", tools: []string{"refund"}, history: true},
		// The inner m is another message: the outer test does not narrow it.
		{src: "request.messages.exists(m, m.tool_calls[0].name == 'refund' && request.messages.exists(m, m.tool_calls[0].args.amout > 1.0))", history: true},
	} {
		reads := toolCallArgReads(c.src)
		require.Len(t, reads, 1, c.src)
		r := reads[0]
		assert.Equal(t, "amout", r.key, c.src)
		assert.Equal(t, c.tools, r.tools, c.src)
		assert.Equal(t, c.history, r.history, c.src)
		assert.Equal(t, "amout", c.src[r.offset:r.offset+len("amout")], c.src)
	}
}

// A list indexed that is not of tool calls, or an args of something else,
// is not a read of a call's arguments.
func TestToolCallArgReadsIndexOfOtherLists(t *testing.T) {
	for _, src := range []string{
		"request.messages[0].args.amout > 1.0",
		"request.tools[0].name == 'refund'",
		"[{'args': {'a': 1}}][0].args.a == 1",
	} {
		assert.Empty(t, toolCallArgReads(src), src)
	}
}
