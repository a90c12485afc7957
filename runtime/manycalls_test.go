package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// Fragments of calls interleaved (a call's fragment after another's began)
// go to their own call.
func TestInterleavedToolCallFragments(t *testing.T) {
	var b runtime.ToolCallBuilder
	for _, f := range []runtime.ToolCallDelta{
		{Index: 0, ID: "a", Name: "f", Arguments: `{"x":`}, {Index: 1, ID: "b", Name: "g", Arguments: `{"y":`},
		{Index: 0, Arguments: `1}`}, {Index: 2, ID: "c", Name: "h", Arguments: `{}`}, {Index: 1, Arguments: `2}`},
	} {
		b.AddFragment(f)
	}
	calls := b.ToolCalls()
	require.Len(t, calls, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{calls[0].ID, calls[1].ID, calls[2].ID})
	assert.JSONEq(t, `{"x":1}`, string(calls[0].Arguments))
	assert.JSONEq(t, `{"y":2}`, string(calls[1].Arguments))
}
