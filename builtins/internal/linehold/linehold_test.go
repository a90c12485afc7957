package linehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/linehold"
	"github.com/agentc-dev/agentc/runtime"
)

func stream(deltas ...runtime.Delta) runtime.ChatHandler {
	return func(_ context.Context, _ *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, d := range deltas {
			if !yield(d) {
				return nil
			}
		}
		return nil
	}
}

var upper = linehold.Filter{Clean: func(s string) (string, error) { return strings.ToUpper(s), nil }}

// TestStreamReleasesLines: text goes out by whole lines, rewritten; usage
// rides on the next release, the finish reason on the last, and text held
// before tool calls goes out with them.
func TestStreamReleasesLines(t *testing.T) {
	var got []runtime.Delta
	c := &runtime.ChatCall{}
	err := linehold.Stream(context.Background(), c, stream(
		runtime.Delta{Text: "ab", Usage: runtime.Usage{InputTokens: 3}},
		runtime.Delta{Text: "c\nd"},
		runtime.Delta{Text: "e", ToolCalls: []runtime.ToolCallDelta{{Index: 0, Name: "t"}}},
		runtime.Delta{Text: "f", FinishReason: "stop"},
	), func(d runtime.Delta) bool { got = append(got, d); return true }, upper)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, runtime.Delta{Text: "ABC\n", Usage: runtime.Usage{InputTokens: 3}}, got[0])
	assert.Equal(t, "DE", got[1].Text)
	assert.Len(t, got[1].ToolCalls, 1)
	assert.Equal(t, runtime.Delta{Text: "F", FinishReason: "stop"}, got[2])
	assert.Equal(t, 3, c.Deltas)
}

// TestStreamCleanFails: a part Clean refuses is never released and its
// error is returned; so is a failed stream's held text.
func TestStreamCleanFails(t *testing.T) {
	refused := errors.New("refused")
	f := linehold.Filter{
		Releasable: func(buf string, _ *linehold.Hold) int { return strings.LastIndexByte(buf, '.') + 1 },
		Clean: func(s string) (string, error) {
			if strings.Contains(s, "x") {
				return "", refused
			}
			return s, nil
		},
	}
	var got strings.Builder
	c := &runtime.ChatCall{}
	err := linehold.Stream(context.Background(), c, stream(runtime.Delta{Text: "ok. a"}, runtime.Delta{Text: "x. b."}),
		func(d runtime.Delta) bool { got.WriteString(d.Text); return true }, f)
	require.ErrorIs(t, err, refused)
	assert.Equal(t, "ok.", got.String())
	assert.Equal(t, 1, c.Deltas)

	got.Reset()
	failing := func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "held"})
		return errors.New("upstream")
	}
	err = linehold.Stream(context.Background(), &runtime.ChatCall{}, failing,
		func(d runtime.Delta) bool { got.WriteString(d.Text); return true }, upper)
	require.EqualError(t, err, "upstream")
	assert.Empty(t, got.String())
}

// TestStreamKeepsARefusal: a refusal's text, held and released, is still
// marked a refusal; the finish reason alone carries no text to mark.
func TestStreamKeepsARefusal(t *testing.T) {
	var got []runtime.Delta
	err := linehold.Stream(context.Background(), &runtime.ChatCall{}, stream(
		runtime.Delta{Text: "I can't\n", Refusal: true},
		runtime.Delta{Text: " help.", Refusal: true},
		runtime.Delta{FinishReason: runtime.FinishContentFilter},
	), func(d runtime.Delta) bool { got = append(got, d); return true }, upper)
	require.NoError(t, err)
	assert.Equal(t, []runtime.Delta{{Text: "I CAN'T\n", Refusal: true}, {Text: " HELP.", Refusal: true, FinishReason: runtime.FinishContentFilter}}, got)
}

// secret refuses nothing and masks "key".
var secret = linehold.Filter{Layer: "redact", Finding: "a secret",
	Clean: func(s string) (string, error) { return strings.ReplaceAll(s, "key", "[K]"), nil }}

func think(i int, text, sig string) runtime.Delta {
	return runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: i, Text: text, Signature: sig}}
}

// TestStreamRelaysCleanThinking: a clean thinking block goes out whole,
// text and signature in one delta, before the text that follows it and
// with the usage reported so far; a redacted_thinking block goes out as it
// came.
func TestStreamRelaysCleanThinking(t *testing.T) {
	var got []runtime.Delta
	c := &runtime.ChatCall{}
	first := think(1, "", "")
	first.Usage = runtime.Usage{InputTokens: 7}
	err := linehold.Stream(context.Background(), c, stream(
		runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: 0, Redacted: true, Signature: "data"}},
		first, think(1, "The user", ""), think(1, " wants Paris.", ""), think(1, "", "sig"),
		runtime.Delta{Text: "Sunny.\n", FinishReason: "stop"},
	), func(d runtime.Delta) bool { got = append(got, d); return true }, secret)
	require.NoError(t, err)
	require.Len(t, got, 4)
	assert.Equal(t, runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: 0, Redacted: true, Signature: "data"}, Usage: runtime.Usage{InputTokens: 7}}, got[0])
	assert.Equal(t, runtime.Delta{Thinking: &runtime.ThinkingDelta{Index: 1, Text: "The user wants Paris.", Signature: "sig"}}, got[1])
	assert.Equal(t, runtime.Delta{Text: "Sunny.\n"}, got[2])
	assert.Equal(t, runtime.Delta{FinishReason: "stop"}, got[3])
	assert.Equal(t, 4, c.Deltas)
}

// TestStreamLeavesOutThinkingWithAFinding: a thinking block Clean would
// change (or refuses) is left out and the next block takes its index; the
// text after it is held to the end and released then, the answer whole.
func TestStreamLeavesOutThinkingWithAFinding(t *testing.T) {
	for name, f := range map[string]linehold.Filter{"masked": secret, "refused": {
		Clean: func(s string) (string, error) {
			if strings.Contains(s, "key") {
				return "", errors.New("refused")
			}
			return s, nil
		}}} {
		t.Run(name, func(t *testing.T) {
			var got []runtime.Delta
			c := &runtime.ChatCall{}
			err := linehold.Stream(context.Background(), c, stream(
				think(0, "The api key is sk-1.", "sig0"), think(1, "Answer plainly.", "sig1"),
				runtime.Delta{Text: "line one\n"}, runtime.Delta{Text: "line two\n", FinishReason: "stop"},
			), func(d runtime.Delta) bool { got = append(got, d); return true }, f)
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, &runtime.ThinkingDelta{Index: 0, Text: "Answer plainly.", Signature: "sig1"}, got[0].Thinking)
			assert.Equal(t, runtime.Delta{Text: "line one\nline two\n", FinishReason: "stop"}, got[1])
			assert.Equal(t, 2, c.Deltas)
		})
	}
}

// TestStreamFailsToolCallsAfterThinkingLeftOut: tool calls after a block
// left out end the stream with a permanent error naming the layer and the
// block; nothing went out, so the failure is a pre-stream one.
func TestStreamFailsToolCallsAfterThinkingLeftOut(t *testing.T) {
	var got []runtime.Delta
	c := &runtime.ChatCall{}
	err := linehold.Stream(context.Background(), c, stream(
		think(0, "Answer plainly.", "sig0"), think(1, "The key", ""), think(1, " is sk-1.", "sig1"),
		runtime.Delta{Text: "Let me check.\n"},
		runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "t1", Name: "get_weather", Arguments: "{}"}}, FinishReason: "tool_calls"},
	), func(d runtime.Delta) bool { got = append(got, d); return true }, secret)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.Equal(t, "redact", ce.Layer)
	assert.Contains(t, ce.Message, "thinking block 1 holds a secret")
	assert.Contains(t, ce.Message, "tool calls that follow it cannot be relayed without it")
	assert.NotContains(t, err.Error(), "sk-1")
	assert.Empty(t, got)
	assert.Zero(t, c.Deltas)
}

// TestStreamThinkingHeldByAFailedStream: thinking held when the stream
// fails is dropped, never released unchecked.
func TestStreamThinkingHeldByAFailedStream(t *testing.T) {
	var got []runtime.Delta
	failing := func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		yield(think(0, "clean", "sig"))
		return errors.New("upstream")
	}
	err := linehold.Stream(context.Background(), &runtime.ChatCall{}, failing,
		func(d runtime.Delta) bool { got = append(got, d); return true }, secret)
	require.EqualError(t, err, "upstream")
	assert.Empty(t, got)
}

// TestStreamRefusesAThinkingIndexFarBeyond: a thinking fragment whose index
// runs far past the blocks seen fails the stream (ThinkingBuilder.Add)
// instead of growing the held blocks to it; nothing after it goes out.
func TestStreamRefusesAThinkingIndexFarBeyond(t *testing.T) {
	var got []runtime.Delta
	err := linehold.Stream(context.Background(), &runtime.ChatCall{}, stream(
		think(0, "clean", "sig"), think(1e9, "far", ""), runtime.Delta{Text: "Sunny.\n"}),
		func(d runtime.Delta) bool { got = append(got, d); return true }, secret)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "thinking fragment index 1000000000")
	for _, d := range got {
		assert.NotEqual(t, "Sunny.\n", d.Text)
	}
}

// TestStreamCleanAfterReadsTheTextBefore: CleanAfter is handed, with each part, the end of
// the text released before it as the stream wrote it (not as it went out), at most
// Lookback bytes and whole characters; thinking is cleaned by Clean alone.
func TestStreamCleanAfterReadsTheTextBefore(t *testing.T) {
	var befores []string
	f := linehold.Filter{
		Clean: func(s string) (string, error) { return s, nil },
		CleanAfter: func(before, text string) (string, error) {
			befores = append(befores, before)
			return strings.ToUpper(text), nil
		},
		Lookback: 5,
	}
	var got strings.Builder
	err := linehold.Stream(context.Background(), &runtime.ChatCall{}, stream(
		runtime.Delta{Text: "ab\n"},
		runtime.Delta{Text: "c日本\n"},
		runtime.Delta{Text: "fghij\n"},
		runtime.Delta{Text: "k"},
	), func(d runtime.Delta) bool { got.WriteString(d.Text); return true }, f)
	require.NoError(t, err)
	assert.Equal(t, "AB\nC日本\nFGHIJ\nK", got.String())
	assert.Equal(t, []string{"", "ab\n", "本\n", "ghij\n"}, befores)
}

// TestStreamCleanAfterKeepsWhatTailKeeps: with Tail set, CleanAfter is handed what Tail kept
// of the text released before, however long.
func TestStreamCleanAfterKeepsWhatTailKeeps(t *testing.T) {
	var befores []string
	f := linehold.Filter{
		Clean: func(s string) (string, error) { return s, nil },
		CleanAfter: func(before, text string) (string, error) {
			befores = append(befores, before)
			return text, nil
		},
		Lookback: 1,
		Tail:     func(before, text string) string { return before + text },
	}
	err := linehold.Stream(context.Background(), &runtime.ChatCall{}, stream(
		runtime.Delta{Text: "ab\n"},
		runtime.Delta{Text: "cd\n"},
		runtime.Delta{Text: "e"},
	), func(runtime.Delta) bool { return true }, f)
	require.NoError(t, err)
	assert.Equal(t, []string{"", "ab\n", "ab\ncd\n"}, befores)
}
