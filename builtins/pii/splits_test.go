package pii_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// A card cut across consecutive string elements of an array, read as a list of lines, is
// found: masked in every element it runs over with "redact", refused with "block". Elements
// of different arrays or values are read apart, and elements are not read run together: an
// address ending one does not take in the next.
func TestCardAcrossArrayElements(t *testing.T) {
	for name, parts := range map[string][]any{
		"groups over elements":       {"card 4111 1111", "1111 1111 thanks"},
		"after a number in the list": {7.0, "4111 1111", "1111 1111"},
	} {
		t.Run(name+"/tool arguments", func(t *testing.T) {
			var seen map[string]any
			pl := toolPipeline(t, `{"action":"redact"}`, func(_ context.Context, c *runtime.ToolCall) (any, error) {
				seen = c.Args
				return "done", nil
			})
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"lines": parts}})
			require.NoError(t, err)
			got := fmt.Sprint(seen)
			assert.Contains(t, got, "[REDACTED:")
			assert.NotContains(t, got, "1111 1111")
			assert.NotContains(t, got, "6016")

			pl = toolPipeline(t, `{}`, func(context.Context, *runtime.ToolCall) (any, error) { return "done", nil })
			_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"lines": parts}})
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "/lines")
		})
		t.Run(name+"/tool call arguments sent back", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": parts})
			require.NoError(t, err)
			got, err := seenByModel(t, `{"action":"redact"}`, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}})
			require.NoError(t, err)
			assert.Contains(t, got, "[REDACTED:")
			assert.NotContains(t, got, "1111 1111")
			assert.NotContains(t, got, "6016")
		})
		t.Run(name+"/model tool call", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": parts})
			require.NoError(t, err)
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: string(args)}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:")
			assert.NotContains(t, calls, "1111 1111")
			assert.NotContains(t, calls, "6016")
			_, _, err = streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
		})
	}
	t.Run("apart", func(t *testing.T) {
		var seen map[string]any
		pl := toolPipeline(t, `{"action":"redact"}`, func(_ context.Context, c *runtime.ToolCall) (any, error) {
			seen = c.Args
			return "done", nil
		})
		args := map[string]any{"a": []any{"4111 1111"}, "b": []any{"1111 1111"}, "c": []any{"4111 1111", 7.0, "1111 1111"},
			"d": []any{"4111 11", "11 1111 1111"}, "e": []any{"write to bob@example.com", "ok"}}
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		require.NoError(t, err)
		want := maps.Clone(args)
		want["e"] = []any{"write to [REDACTED:email]", "ok"}
		assert.Equal(t, want, seen)
	})
}
