package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The fallbacks of answerBlocks.message: a thinking block the order lacks
// goes first, one with neither text nor signature is left out, a call the
// order lacks goes last, and a call whose index began before the call
// before it (a stream out of order) never goes before that call.
func TestAnswerBlocksMessageFallbacks(t *testing.T) {
	var o answerBlocks
	for _, d := range []Delta{
		{Thinking: &ThinkingDelta{Index: 2, Text: "b", Signature: "sig-B"}},
		{ToolCalls: []ToolCallDelta{{Index: 5}}},
		{Text: "text"},
		{ToolCalls: []ToolCallDelta{{Index: 3}}},
	} {
		o.add(&d)
	}
	thinking := []ContentPart{
		{Type: PartThinking, Text: "a", Signature: "sig-A"},
		{Type: PartThinking},
		{Type: PartThinking, Text: "b", Signature: "sig-B"},
	}
	call := func(id string) ToolUse { return ToolUse{ID: id, Arguments: json.RawMessage(`{}`)} }
	msg := o.message("text", thinking, []ToolUse{call("i3"), call("i5"), call("extra")})
	var got []string
	for j, k := range msg.Blocks() {
		if k >= 0 {
			got = append(got, msg.ToolCalls[k].ID)
		} else {
			got = append(got, msg.Parts[j].Type+":"+msg.Parts[j].Text)
		}
	}
	assert.Equal(t, []string{"thinking:a", "thinking:b", "text:text", "i3", "i5", "extra"}, got)
	assert.Empty(t, msg.Content)
	for k, c := range msg.ToolCalls {
		assert.Zero(t, c.PartsAfter, "call %d: after every part, as the call before it", k)
	}
}
