package runtime_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
)

// TestManyToolCallsAssembleInLinearTime: the fragments of a response's tool calls, each
// call's in a row as a stream sends them, are assembled in time proportional to their
// number: four times as many calls take under eight times as long. Each fragment was
// matched to its call by a scan of the calls begun (20,000 calls of three fragments took
// under half a second, and a prompt decides how many calls the model makes).
func TestManyToolCallsAssembleInLinearTime(t *testing.T) {
	run := func(n int) time.Duration {
		var b runtime.ToolCallBuilder
		d := cputime.Of(func() {
			for i := range n {
				b.AddFragment(runtime.ToolCallDelta{Index: i, ID: "c" + strconv.Itoa(i), Name: "f"})
				b.AddFragment(runtime.ToolCallDelta{Index: i, Arguments: `{"a":`})
				b.AddFragment(runtime.ToolCallDelta{Index: i, Arguments: `1}`})
			}
		})
		calls := b.ToolCalls()
		require.Len(t, calls, n)
		assert.Equal(t, "c"+strconv.Itoa(n-1), calls[n-1].ID)
		assert.JSONEq(t, `{"a":1}`, string(calls[n-1].Arguments))
		return d
	}
	run(500) // warm up
	small, large := run(10000), run(40000)
	assert.Less(t, large, 8*small+100*time.Millisecond, "10,000 calls took %v, 40,000 %v", small, large)
}

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
