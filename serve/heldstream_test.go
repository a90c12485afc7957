package serve

import (
	"math"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// keptStream is a stream writer that keeps the deltas it is given.
type keptStream struct{ got []runtime.Delta }

func (s *keptStream) delta(d runtime.Delta) bool     { s.got = append(s.got, d); return true }
func (s *keptStream) started() bool                  { return len(s.got) > 0 }
func (s *keptStream) flushHeld() bool                { return true }
func (s *keptStream) free()                          {}
func (s *keptStream) end(resp *runtime.ChatResponse) {}
func (s *keptStream) fail(err error)                 {}

// TestHeldStreamHoldsACallOnce: a streamed answer's call, which the chat
// chain's terminal already held until the answer ended and handed up
// whole (runtime.HoldToolCalls), was held a second time by the gateway
// (its arguments copied into a builder of its own) and copied a third time
// to be relayed: 279,328 bytes allocated for a call of 131,083 bytes of
// arguments. The fragment is held as it came; the calls are assembled once
// the stream ended, for their admission, and a call that came whole is
// relayed as it came.
func TestHeldStreamHoldsACallOnce(t *testing.T) {
	args := `{"data":"` + strings.Repeat("x", 128<<10) + `"}`
	deltas := []runtime.Delta{{Text: "Let me check."},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "put", Arguments: args}}},
		{FinishReason: runtime.FinishToolCalls}}
	// The counts are the process's: another goroutine (a connection an
	// earlier test left to close) may allocate between two of them, so
	// each is the least of a few rounds.
	hold, assemble, release := uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(math.MaxUint64)
	for range 5 {
		out := &keptStream{got: make([]runtime.Delta, 0, 4)}
		w := &heldStream{chatStream: out, held: make([]runtime.Delta, 0, 4)}
		var before, held, assembled, released goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		for _, d := range deltas {
			require.True(t, w.hold(d))
		}
		goruntime.ReadMemStats(&held)
		calls := w.toolCalls()
		goruntime.ReadMemStats(&assembled)
		w.release(calls, nil)
		goruntime.ReadMemStats(&released)

		require.Len(t, calls, 1)
		assert.Equal(t, args, string(calls[0].Arguments))
		require.Len(t, out.got, 2)
		assert.Equal(t, "Let me check.", out.got[0].Text)
		assert.Equal(t, []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "put", Arguments: args}}, out.got[1].ToolCalls)
		hold = min(hold, held.TotalAlloc-before.TotalAlloc)
		assemble = min(assemble, assembled.TotalAlloc-held.TotalAlloc)
		release = min(release, released.TotalAlloc-assembled.TotalAlloc)
	}
	t.Logf("%d bytes of arguments: held %d bytes, assembled %d, released %d, in all %d", len(args), hold, assemble, release, hold+assemble+release)
	if raceEnabled {
		return
	}
	assert.Less(t, hold, uint64(1<<10), "the fragment is held as it came")
	assert.Less(t, assemble, uint64(len(args)*5/4), "the calls are assembled once, for their admission")
	assert.Less(t, release, uint64(1<<10), "a call that came whole is relayed as it came")
}

// TestHeldStreamRelaysCallsWhole: calls that came in fragments go whole,
// each in the place of its first fragment, indexed by its place among the
// calls relayed; a call left out (a repeat) leaves no place behind, and a
// call of blank arguments goes with {} as it was admitted.
func TestHeldStreamRelaysCallsWhole(t *testing.T) {
	out := &keptStream{}
	w := &heldStream{chatStream: out}
	for _, d := range []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 3, ID: "a", Name: "refund", Arguments: `{"amount":`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 3, Arguments: `5}`}, {Index: 5, ID: "b", Name: "refund", Arguments: `{"amount":5}`}}},
		{Text: "and", ToolCalls: []runtime.ToolCallDelta{{Index: 7, ID: "c", Name: "lookup", Arguments: "  "}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 9, ID: "d", Name: "lookup", Arguments: `{"q":1}`}}},
	} {
		require.True(t, w.hold(d))
	}
	calls := w.toolCalls()
	require.Len(t, calls, 4)
	w.release(calls, []bool{false, true, false, false})
	var got []runtime.ToolCallDelta
	for _, d := range out.got {
		got = append(got, d.ToolCalls...)
	}
	assert.Equal(t, []runtime.ToolCallDelta{
		{Index: 0, ID: "a", Name: "refund", Arguments: `{"amount":5}`},
		{Index: 1, ID: "c", Name: "lookup", Arguments: `{}`},
		{Index: 2, ID: "d", Name: "lookup", Arguments: `{"q":1}`},
	}, got)
	require.Len(t, out.got, 3, "the delta of the call left out, and the later fragment's, are not sent")
	assert.Equal(t, "and", out.got[1].Text)
}
