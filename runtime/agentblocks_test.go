package runtime

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The fallbacks of BlockOrder.message: a thinking block the order lacks
// goes first, one with neither text nor signature is left out, a call the
// order lacks goes last, and a call whose index began before the call
// before it (a stream out of order) never goes before that call.
func TestAnswerBlocksMessageFallbacks(t *testing.T) {
	var o BlockOrder
	for _, d := range []Delta{
		{Thinking: &ThinkingDelta{Index: 2, Text: "b", Signature: "sig-B"}},
		{ToolCalls: []ToolCallDelta{{Index: 5}}},
		{Text: "text"},
		{ToolCalls: []ToolCallDelta{{Index: 3}}},
	} {
		o.Add(&d)
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

// BlockOrder starts a text block where a refusal's text follows an
// answer's (the gateway answers them as two blocks), and the agent turn's
// message keeps them one text part, as the model's text run on.
func TestBlockOrderRefusalTextIsOnePartOfTheMessage(t *testing.T) {
	var o BlockOrder
	for _, d := range []Delta{
		{Thinking: &ThinkingDelta{Index: 0, Text: "a", Signature: "sig-A"}},
		{Text: "Here is how to"},
		{Text: "I can't help with that.", Refusal: true},
	} {
		o.Add(&d)
	}
	assert.Equal(t, []OrderedBlock{
		{Kind: BlockThinking, Index: 0},
		{Kind: BlockText, From: 0, To: 14},
		{Kind: BlockText, From: 14, To: 37, Refusal: true},
	}, o.Blocks)
	msg := o.message("Here is how toI can't help with that.", []ContentPart{{Type: PartThinking, Text: "a", Signature: "sig-A"}}, nil)
	assert.Equal(t, []ContentPart{
		{Type: PartThinking, Text: "a", Signature: "sig-A"},
		{Type: PartText, Text: "Here is how toI can't help with that."},
	}, msg.Parts)
}
