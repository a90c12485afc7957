package chatcache_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/chatcache"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// model returns a handler that streams texts the way the innermost handler
// does (serving model "m", one output token per delta), then returns err.
func model(err error, texts ...string) runtime.ChatHandler {
	return func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		c.Served = "m"
		c.Annotate("layer", "note")
		for _, s := range texts {
			c.Usage.OutputTokens++
			if !c.Emit(yield, runtime.Delta{Text: s}) {
				return nil
			}
		}
		return err
	}
}

func TestRecord(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		next    runtime.ChatHandler
		take    int // deltas the consumer accepts; -1 for all
		want    *chatcache.Entry
		wantErr error
	}{
		{name: "complete", next: model(nil, "a", "b"), take: -1, want: &chatcache.Entry{
			Deltas: []string{"a", "b"}, Usage: runtime.Usage{OutputTokens: 2}, Served: "m",
			Annotations: map[string]any{"layer": "note"}}},
		{name: "empty response", next: model(nil), take: -1, want: &chatcache.Entry{
			Deltas: []string{}, Served: "m", Annotations: map[string]any{"layer": "note"}}},
		{name: "failed", next: model(boom, "a"), take: -1, wantErr: boom},
		{name: "consumer stopped", next: model(nil, "a", "b"), take: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &runtime.ChatCall{Usage: runtime.Usage{InputTokens: 7, OutputTokens: 1}}
			var got []string
			yield := func(d runtime.Delta) bool {
				if tt.take >= 0 && len(got) >= tt.take {
					return false
				}
				got = append(got, d.Text)
				return true
			}
			e, err := chatcache.Record(context.Background(), c, tt.next, yield)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, e)
			if tt.want != nil {
				assert.Equal(t, tt.want.Deltas, append([]string{}, got...), "deltas pass through as they arrive")
			}
		})
	}
}

func TestReplay(t *testing.T) {
	e := &chatcache.Entry{Deltas: []string{"a", "b"}, Usage: runtime.Usage{InputTokens: 3, OutputTokens: 2},
		Served: "m", Annotations: map[string]any{"layer": "note"}}
	c := &runtime.ChatCall{Usage: runtime.Usage{InputTokens: 1}}
	var got []string
	chatcache.Replay(c, e, runtime.NewSeededRandom(1), func(d runtime.Delta) bool { got = append(got, d.Text); return true })
	assert.Equal(t, []string{"a", "b"}, got)
	assert.True(t, c.Meta.Cached)
	assert.Equal(t, "m", c.Served)
	assert.Equal(t, runtime.Usage{InputTokens: 4, OutputTokens: 2}, c.Usage)
	assert.Equal(t, map[string]any{"layer": "note"}, c.Annotations)
	assert.Equal(t, 2, c.Deltas)

	stopped := &runtime.ChatCall{}
	got = nil
	chatcache.Replay(stopped, e, runtime.NewSeededRandom(1), func(d runtime.Delta) bool { got = append(got, d.Text); return false })
	assert.Equal(t, []string{"a"}, got, "replay stops with the consumer")
	assert.True(t, stopped.Stopped)
}

// A response with thinking blocks is relayed whole but not recorded: an
// entry keeps no thinking, and its replay would leave a client in a
// tool-use turn no thinking block to send back.
func TestRecordLeavesThinkingResponses(t *testing.T) {
	next := func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		c.Served = "m"
		if !c.Emit(yield, runtime.Delta{Thinking: &runtime.ThinkingDelta{Text: "let me see", Signature: "sig"}}) {
			return nil
		}
		c.Emit(yield, runtime.Delta{Text: "answer", FinishReason: runtime.FinishStop})
		return nil
	}
	c := &runtime.ChatCall{}
	var got []runtime.Delta
	e, err := chatcache.Record(context.Background(), c, next, func(d runtime.Delta) bool {
		got = append(got, d)
		return true
	})
	require.NoError(t, err)
	assert.Nil(t, e, "not cached")
	require.Len(t, got, 2, "every delta reaches the consumer")
	require.NotNil(t, got[0].Thinking)
	assert.Equal(t, "sig", got[0].Thinking.Signature)
	assert.Equal(t, "answer", got[1].Text)
}

// Only a finished answer is recorded: a paused turn (pause_turn) is not
// one, nor a filter's cut (content_filter), nor a refusal whatever its
// finish reason, nor an end the runtime has no word for. An answer cut at
// max_tokens (length) is recorded: the key holds the bound, and the
// replay says the answer was cut.
func TestRecordKeepsOnlyFinishedAnswers(t *testing.T) {
	for _, tt := range []struct {
		name     string
		last     runtime.Delta
		recorded bool
	}{
		{"stop", runtime.Delta{Text: "b", FinishReason: runtime.FinishStop}, true},
		{"no finish reason", runtime.Delta{Text: "b"}, true},
		{"length", runtime.Delta{Text: "b", FinishReason: runtime.FinishLength}, true},
		{"tool_calls", runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c", Name: "t"}}, FinishReason: runtime.FinishToolCalls}, true},
		{"pause_turn", runtime.Delta{Text: "b", FinishReason: runtime.FinishPauseTurn}, false},
		{"content_filter", runtime.Delta{Text: "b", FinishReason: runtime.FinishContentFilter}, false},
		{"refusal cut at length", runtime.Delta{Text: "b", Refusal: true, FinishReason: runtime.FinishLength}, false},
		{"an unknown end", runtime.Delta{Text: "b", FinishReason: "compaction"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
				_ = c.Emit(yield, runtime.Delta{Text: "a"}) && c.Emit(yield, tt.last)
				return nil
			}
			n := 0
			e, err := chatcache.Record(context.Background(), &runtime.ChatCall{}, next, func(runtime.Delta) bool { n++; return true })
			require.NoError(t, err)
			assert.Equal(t, 2, n, "every delta reaches the consumer")
			if !tt.recorded {
				assert.Nil(t, e)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, tt.last.FinishReason, e.FinishReason)
		})
	}
}

// A replayed answer's tool calls get ids of their own: the stored ids are
// those of the calls that ran when it was recorded, which a transcript or
// a client would take the replayed calls for.
func TestReplayGivesCallsIDsOfTheirOwn(t *testing.T) {
	e := &chatcache.Entry{Deltas: []string{}, FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolUse{
		{ID: "toolu_01AbC", Name: "balance", Arguments: []byte(`{"account":"A"}`)},
		{ID: "a-very-long-provider-id_1", Name: "balance", Arguments: []byte(`{"account":"B"}`)},
	}}
	r := runtime.NewSeededRandom(1)
	replay := func() []runtime.ToolUse {
		var calls runtime.ToolCallBuilder
		chatcache.Replay(&runtime.ChatCall{}, e, r, func(d runtime.Delta) bool { calls.Add(&d); return true })
		return calls.ToolCalls()
	}
	first, second := replay(), replay()
	require.Len(t, first, 2)
	require.Len(t, second, 2)
	seen := map[string]bool{"toolu_01AbC": true, "a-very-long-provider-id_1": true}
	for i, c := range append(first, second...) {
		assert.Regexp(t, `^(toolu|call)_[A-Za-z0-9]{24}$`, c.ID)
		assert.LessOrEqual(t, len(c.ID), 40, "within what OpenAI accepts")
		assert.False(t, seen[c.ID], "call %d: id %q given before", i, c.ID)
		seen[c.ID] = true
		assert.Equal(t, e.ToolCalls[i%2].Name, c.Name)
		assert.JSONEq(t, string(e.ToolCalls[i%2].Arguments), string(c.Arguments))
	}
	assert.True(t, strings.HasPrefix(first[0].ID, "toolu_"), "the provider's prefix is kept")
	assert.True(t, strings.HasPrefix(first[1].ID, "call_"), "a prefix of more than 8 characters is not")
	assert.Equal(t, "toolu_01AbC", e.ToolCalls[0].ID, "the entry is not modified")
}

// Only calls of the tools the policy declares and does not mark
// side_effecting are kept in a cached answer.
func TestCallsOnlyReadOnlyTools(t *testing.T) {
	ro := chatcache.ReadOnlyTools(&plan.Plan{Tools: map[string]plan.Tool{
		"balance":  {},
		"transfer": {SideEffecting: true, RetrySafe: true},
	}})
	assert.Equal(t, map[string]bool{"balance": true}, ro)
	call := func(names ...string) *chatcache.Entry {
		e := &chatcache.Entry{}
		for _, n := range names {
			e.ToolCalls = append(e.ToolCalls, runtime.ToolUse{ID: "c", Name: n})
		}
		return e
	}
	assert.True(t, call().CallsOnly(ro), "an answer without calls")
	assert.True(t, call("balance", "balance").CallsOnly(ro))
	assert.False(t, call("balance", "transfer").CallsOnly(ro), "side-effecting")
	assert.False(t, call("mcp_fetch").CallsOnly(ro), "not declared: its effects are unknown")
	assert.Empty(t, chatcache.ReadOnlyTools(nil))
}
