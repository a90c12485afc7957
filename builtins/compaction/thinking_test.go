package compaction_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// An agent turn's assistant message with thinking (RunAgent's shape: the
// signed blocks as parts, the calls in place among them) is kept whole
// with its results: an Anthropic model refuses a tool-use continuation
// whose last assistant turn lost a signed block or its order.
func TestCompactionKeepsTheLastTurnsThinking(t *testing.T) {
	for _, strategy := range []string{`"keep_recent"`, `"importance"`} {
		model := &recorder{text: "ok"}
		pl := build(t, `{"strategy":`+strategy+`,"max_tokens":200,"keep_recent":1}`, map[string]runtime.ModelClient{"primary": model})
		turn := runtime.Message{Role: "assistant",
			Parts: []runtime.ContentPart{
				{Type: runtime.PartThinking, Text: long(90), Signature: "sig-A"},
				{Type: runtime.PartRedactedThinking, Signature: "opaque=="},
				{Type: runtime.PartText, Text: "And Lyon."},
			},
			ToolCalls: []runtime.ToolUse{
				{ID: "c1", Name: "weather", Arguments: json.RawMessage(`{"city":"Paris"}`), PartsAfter: 2},
				{ID: "c2", Name: "weather", Arguments: json.RawMessage(`{"city":"Lyon"}`)},
			},
		}
		msgs := append(transcript(6), runtime.Message{Role: "user", Content: "Paris and Lyon?"}, turn,
			runtime.Message{Role: "tool", ToolCallID: "c1", Content: "sunny"},
			runtime.Message{Role: "tool", ToolCallID: "c2", Content: "rain"})
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err)
		got := model.seen[0]
		require.Less(t, len(got), len(msgs), strategy)
		require.GreaterOrEqual(t, len(got), 3, strategy)
		assert.Equal(t, msgs[len(msgs)-3:], got[len(got)-3:], strategy)
	}
}
