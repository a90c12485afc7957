package runtime_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// streamOf returns a handler that delivers deltas the way the layers below a
// buffering layer do (counting each in c.Deltas), then returns err.
func streamOf(err error, deltas ...runtime.Delta) runtime.ChatHandler {
	return func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, d := range deltas {
			if !c.Emit(yield, d) {
				return nil
			}
		}
		return err
	}
}

func TestBuffer(t *testing.T) {
	a := runtime.Delta{Text: "a", Usage: runtime.Usage{InputTokens: 3}}
	b := runtime.Delta{Text: "bc", Usage: runtime.Usage{OutputTokens: 2}}
	boom := errors.New("boom")
	tests := []struct {
		name     string
		next     runtime.ChatHandler
		take     int // deltas the consumer accepts; -1 for all
		wantText string
		wantErr  error
		// after Release
		wantAll     bool
		wantGot     []runtime.Delta
		wantDeltas  int
		wantStopped bool
	}{
		{name: "all released", next: streamOf(nil, a, b), take: -1, wantText: "abc",
			wantAll: true, wantGot: []runtime.Delta{a, b}, wantDeltas: 7},
		{name: "consumer stops", next: streamOf(nil, a, b), take: 1, wantText: "abc",
			wantAll: false, wantGot: []runtime.Delta{a}, wantDeltas: 7, wantStopped: true},
		{name: "empty stream", next: streamOf(nil), take: -1, wantText: "",
			wantAll: true, wantDeltas: 5},
		{name: "failure mid-stream", next: streamOf(boom, a), take: -1, wantText: "a", wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &runtime.ChatCall{Deltas: 5}
			var got []runtime.Delta
			yield := func(d runtime.Delta) bool {
				if tt.take >= 0 && len(got) >= tt.take {
					return false
				}
				got = append(got, d)
				return true
			}
			buf, err := runtime.Buffer(context.Background(), c, tt.next)
			assert.Equal(t, 5, c.Deltas, "nothing got past the buffering layer")
			assert.Empty(t, got, "nothing reaches the consumer while buffering")
			assert.Equal(t, tt.wantText, buf.Text)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Len(t, buf.Held, 1, "what arrived before the failure is returned")
				return
			}
			require.NoError(t, err)

			assert.Equal(t, tt.wantAll, buf.Release(c, yield))
			assert.Equal(t, tt.wantGot, got)
			assert.Equal(t, tt.wantDeltas, c.Deltas, "Release counts what it pushes, as Emit does")
			assert.Equal(t, tt.wantStopped, c.Stopped)
		})
	}
}

func TestBufferedUsage(t *testing.T) {
	buf := runtime.Buffered{Held: []runtime.Delta{
		{Text: "a", Usage: runtime.Usage{InputTokens: 3, OutputTokens: 1}},
		{Text: "b", Usage: runtime.Usage{OutputTokens: 2}},
	}}
	assert.Equal(t, runtime.Usage{InputTokens: 3, OutputTokens: 3}, buf.Usage())
	assert.True(t, runtime.Buffered{}.Usage().IsZero())
}

// interleavedStream is a turn of Anthropic's interleaved thinking as the
// model client delivers it: a thinking block, text, a call, a thinking
// block between the calls, text, a second call.
var interleavedStream = []runtime.Delta{
	{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "Weather first."}, Usage: runtime.Usage{InputTokens: 50}},
	{Thinking: &runtime.ThinkingDelta{Index: 0, Signature: "sig-0"}},
	{Text: "Let me check."},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "toolu_a", Name: "get_weather"}}},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `{"city":`}}},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `"Paris"}`}}},
	{Thinking: &runtime.ThinkingDelta{Index: 1, Text: "Now the time."}},
	{Thinking: &runtime.ThinkingDelta{Index: 1, Signature: "sig-1"}},
	{Thinking: &runtime.ThinkingDelta{Index: 2, Redacted: true, Signature: "data-2"}},
	{Text: "And the time."},
	{ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "toolu_b", Name: "get_time", Arguments: `{"city":"Paris"}`}}},
	{FinishReason: runtime.FinishToolCalls, Usage: runtime.Usage{OutputTokens: 90}},
}

// Thinking that arrives between tool calls is held with them and released
// in its place, signature and all: thinking, text, call, thinking, text,
// call, as the model sent them. What came before the first call passed at
// once.
func TestHoldToolCallsKeepsInterleavedThinkingInPlace(t *testing.T) {
	c := &runtime.ChatCall{Request: runtime.ChatRequest{Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}}}
	var got []runtime.Delta
	var before int // deltas out when check ran
	check := func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
		before = len(got)
		require.Len(t, calls, 2)
		calls[0].Arguments = []byte(`{"city":"PARIS"}`) // a rewrite (redact masking)
		return calls, nil
	}
	err := runtime.HoldToolCalls(context.Background(), c, streamOf(nil, interleavedStream...), func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	}, check)
	require.NoError(t, err)
	assert.Equal(t, 3, before, "the thinking and text before the first call passed at once")
	want := []runtime.Delta{
		interleavedStream[0], interleavedStream[1], interleavedStream[2],
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "toolu_a", Name: "get_weather", Arguments: `{"city":"PARIS"}`}}},
		{Thinking: &runtime.ThinkingDelta{Index: 1, Text: "Now the time."}},
		{Thinking: &runtime.ThinkingDelta{Index: 1, Signature: "sig-1"}},
		{Thinking: &runtime.ThinkingDelta{Index: 2, Redacted: true, Signature: "data-2"}},
		{Text: "And the time."},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "toolu_b", Name: "get_time", Arguments: `{"city":"Paris"}`}},
			FinishReason: runtime.FinishToolCalls, Usage: runtime.Usage{OutputTokens: 90}},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, len(want), c.Deltas)

	// Assembled, the response holds every block, the signatures whole.
	var tb runtime.ThinkingBuilder
	for i := range got {
		tb.Add(&got[i])
	}
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartThinking, Text: "Weather first.", Signature: "sig-0"},
		{Type: runtime.PartThinking, Text: "Now the time.", Signature: "sig-1"}, {Type: runtime.PartRedactedThinking, Signature: "data-2"}}, tb.Blocks())
}

// A call refused, a stream that fails and a consumer that stops keep their
// meaning with thinking held: nothing held after the first call goes out on
// a refusal or a failure, and the release stops where the consumer did.
func TestHoldToolCallsInterleavedRefusedFailedStopped(t *testing.T) {
	thinking := runtime.ChatRequest{Thinking: &runtime.Thinking{Type: "adaptive"}}
	keep := func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) { return calls, nil }
	run := func(next runtime.ChatHandler, take int, check func([]runtime.ToolUse) ([]runtime.ToolUse, error)) (*runtime.ChatCall, []runtime.Delta, error) {
		c := &runtime.ChatCall{Request: thinking}
		var got []runtime.Delta
		err := runtime.HoldToolCalls(context.Background(), c, next, func(d runtime.Delta) bool {
			if len(got) == take {
				return false
			}
			got = append(got, d)
			return true
		}, check)
		return c, got, err
	}
	refused := errors.New("refused")
	c, got, err := run(streamOf(nil, interleavedStream...), -1, func([]runtime.ToolUse) ([]runtime.ToolUse, error) { return nil, refused })
	require.ErrorIs(t, err, refused)
	assert.Len(t, got, 3, "only what came before the first call went out")
	assert.Equal(t, 3, c.Deltas)

	c, got, err = run(streamOf(errors.New("reset"), interleavedStream[:9]...), -1, keep)
	require.ErrorContains(t, err, "reset")
	assert.Len(t, got, 3, "a failed stream's held calls and thinking are dropped")
	assert.Equal(t, 3, c.Deltas)

	c, got, err = run(streamOf(nil, interleavedStream...), 5, keep)
	require.NoError(t, err)
	assert.Len(t, got, 5)
	assert.Equal(t, "Now the time.", got[4].Thinking.Text)
	assert.True(t, c.Stopped)
	assert.Equal(t, 6, c.Deltas, "the refused delta counts")
}

// Without thinking asked for, text after a call still passes at once (no
// signature covers its place), and the calls go out in one delta; thinking
// that arrives after a call anyway is kept in its place, and the text after
// it with it.
func TestHoldToolCallsTextAfterACall(t *testing.T) {
	stream := []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "a", Name: "x", Arguments: `{}`}}},
		{Text: "and"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 1, ID: "b", Name: "y", Arguments: `{}`}}},
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "hm", Signature: "s"}},
		{Text: "then"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 2, ID: "c", Name: "z", Arguments: `{}`}}},
	}
	var got []runtime.Delta
	err := runtime.HoldToolCalls(context.Background(), &runtime.ChatCall{}, streamOf(nil, stream...), func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	}, func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) { return calls, nil })
	require.NoError(t, err)
	assert.Equal(t, []runtime.Delta{
		{Text: "and"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "a", Name: "x", Arguments: `{}`}, {Index: 1, ID: "b", Name: "y", Arguments: `{}`}}},
		{Thinking: &runtime.ThinkingDelta{Index: 0, Text: "hm", Signature: "s"}},
		{Text: "then"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 2, ID: "c", Name: "z", Arguments: `{}`}}},
	}, got)
}

// WholeToolCalls puts each call in the place of its first fragment, by its
// rank among the indexes; a call the rewrite added goes with the last.
func TestWholeToolCalls(t *testing.T) {
	held := []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 3, ID: "a", Name: "x"}}},
		{Thinking: &runtime.ThinkingDelta{Index: 1}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 7, ID: "b", Name: "y"}, {Index: 3, Arguments: "{}"}}},
	}
	calls := []runtime.ToolUse{{ID: "a", Name: "x", Arguments: []byte("{}")}, {ID: "b", Name: "y", Arguments: []byte("{}")}, {ID: "c", Name: "z", Arguments: []byte("{}")}}
	runtime.WholeToolCalls(held, calls)
	assert.Equal(t, []runtime.ToolCallDelta{{Index: 0, ID: "a", Name: "x", Arguments: "{}"}}, held[0].ToolCalls)
	assert.Nil(t, held[1].ToolCalls)
	assert.Equal(t, []runtime.ToolCallDelta{{Index: 1, ID: "b", Name: "y", Arguments: "{}"}, {Index: 2, ID: "c", Name: "z", Arguments: "{}"}}, held[2].ToolCalls)

	held = []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0}}}, {ToolCalls: []runtime.ToolCallDelta{{Index: 1}}}}
	runtime.WholeToolCalls(held, calls[:1])
	assert.Len(t, held[0].ToolCalls, 1)
	assert.Nil(t, held[1].ToolCalls, "a place the rewrite left without a call keeps none")
}

// TestHoldToolCallsHoldsEachFragmentOnce: every fragment was held twice,
// in the deltas kept in place and in the call being assembled, and the
// deltas of a call's later fragments were kept too. The arguments are held
// once; the place of a call is the delta of its first fragment. An answer
// of text alone, to a request that offers tools, holds nothing.
func TestHoldToolCallsHoldsEachFragmentOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations are not the program's")
	}
	const fragments, size = 2000, 64
	piece := `"` + strings.Repeat("x", size-3) + `",`
	deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "lookup", Arguments: `{"q":[`}}}}
	for range fragments {
		deltas = append(deltas, runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: piece}}})
	}
	deltas = append(deltas, runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `""]}`}}}, runtime.Delta{FinishReason: runtime.FinishToolCalls})
	next := streamOf(nil, deltas...)
	check := func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) { return calls, nil }
	var got []runtime.Delta
	allocated := func(next runtime.ChatHandler) uint64 {
		got = got[:0]
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		err := runtime.HoldToolCalls(context.Background(), &runtime.ChatCall{}, next, func(d runtime.Delta) bool {
			got = append(got, d)
			return true
		}, check)
		goruntime.ReadMemStats(&after)
		require.NoError(t, err)
		return after.TotalAlloc - before.TotalAlloc
	}
	got = make([]runtime.Delta, 0, 8)
	bytes := allocated(next)
	require.Len(t, got, 1, "the call goes out whole, in one delta")
	assert.Equal(t, fragments*size+10, len(got[0].ToolCalls[0].Arguments))
	// The builder's growing buffer (at most about 2x the arguments, summed
	// over its growth about 4x) and the call released whole; not a
	// Delta per fragment.
	assert.Less(t, bytes, uint64(7*fragments*size), "allocated %d bytes for %d bytes of arguments", bytes, fragments*size)

	// An answer of text alone: what HoldToolCalls allocates beyond a
	// plain pass (its closures), averaged over runs.
	text := streamOf(nil, runtime.Delta{Text: "no call"}, runtime.Delta{FinishReason: runtime.FinishStop})
	discard := func(runtime.Delta) bool { return true }
	perRun := func(f func()) uint64 {
		const runs = 200
		f()
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		for range runs {
			f()
		}
		goruntime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / runs
	}
	c := &runtime.ChatCall{}
	plain := perRun(func() { _ = runtime.HoldToolCalls(context.Background(), c, text, discard, check) })
	assert.Less(t, plain, uint64(160), "an answer without calls holds nothing: %d bytes a run", plain)
	t.Logf("held a call: %d bytes; text alone: %d bytes", bytes, plain)
}
