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
