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
		Releasable: func(buf string) int { return strings.LastIndexByte(buf, '.') + 1 },
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
