package mask_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// TestMaskedToolCallIDsStayDistinct: two tool-call ids a client chose that
// held personal data (call_ann@example.com, call_bob@example.org) were
// masked to one id, so two results answered one call (and Anthropic's API
// refuses two tool_use blocks of one id). Masked ids stay distinct, each
// call paired with its own result, the first masked as before.
func TestMaskedToolCallIDsStayDistinct(t *testing.T) {
	email := regexp.MustCompile(`[a-z]+@[a-z.]+`)
	m := func(s string) (string, int) {
		n := len(email.FindAllString(s, -1))
		return email.ReplaceAllString(s, "[EMAIL]"), n
	}
	calls := []runtime.ToolUse{
		{ID: "call_ann@example.com", Name: "f", Arguments: json.RawMessage(`{}`)},
		{ID: "call_bob@example.org", Name: "f", Arguments: json.RawMessage(`{}`)},
		{ID: "call_[EMAIL]_2", Name: "f", Arguments: json.RawMessage(`{}`)},
	}
	msgs := []runtime.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: calls},
		{Role: "tool", ToolCallID: "call_ann@example.com", Content: "a"},
		{Role: "tool", ToolCallID: "call_bob@example.org", Content: "b"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_[EMAIL]_2", Text: "c"}}},
	}
	got, ok := mask.Transcript{Mask: m}.Messages("", msgs)
	require.True(t, ok)
	ids := []string{got[1].ToolCalls[0].ID, got[1].ToolCalls[1].ID, got[1].ToolCalls[2].ID}
	assert.Equal(t, "call_[EMAIL]", ids[0], "the first id masked as before")
	assert.NotEqual(t, ids[0], ids[1])
	assert.NotEqual(t, ids[1], ids[2], "a masked id does not take one the client sent")
	assert.Equal(t, "call_[EMAIL]_2", ids[2])
	assert.Equal(t, ids[0], got[2].ToolCallID)
	assert.Equal(t, ids[1], got[3].ToolCallID)
	assert.Equal(t, ids[2], got[4].Parts[0].ToolCallID)
	for _, id := range ids {
		assert.NotContains(t, id, "@")
	}
}
