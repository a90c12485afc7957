package pii_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestDuplicatedKeyBlockedIsMasked: an object whose key is written twice holds two members,
// which the model reads both, though a JSON decoder keeps the last. Whichever member holds the
// data, "block" refuses the arguments of a tool call the model makes, sent back or written in
// a tool message, and "redact" masks it, neither member left in clear.
func TestDuplicatedKeyBlockedIsMasked(t *testing.T) {
	for _, args := range []string{
		`{"q": "4111111111111111", "q": "x"}`,
		`{"q": "x", "q": "4111111111111111"}`,
		`{"q": {"card": "4111 1111 1111 1111"}, "q": {"card": "x"}}`,
		`{"q": "4111 1111", "q": "1111 1111"}`,
		`[{"q": "jane.doe@example.com", "q": 7}]`,
	} {
		t.Run(args+"/model tool call", func(t *testing.T) {
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: args}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, _, err := streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "the model's call of tool post")
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:")
			assertNoPiece(t, calls)
			assert.NotContains(t, calls, "jane.doe")
		})
		for name, msgs := range map[string][]runtime.Message{
			"sent back":    {{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(args)}}}},
			"tool message": {{Role: "tool", ToolCallID: "c1", Content: args}},
		} {
			t.Run(args+"/"+name, func(t *testing.T) {
				_, err := seenByModel(t, `{}`, msgs)
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b)
				got, err := seenByModel(t, `{"action":"redact"}`, msgs)
				require.NoError(t, err)
				assert.Contains(t, got, "[REDACTED:")
				assertNoPiece(t, got)
				assert.NotContains(t, got, "jane.doe")
			})
		}
	}
}
