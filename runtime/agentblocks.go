package runtime

import "slices"

// The kinds of block of a model answer (OrderedBlock.Kind).
const (
	BlockThinking = iota
	BlockText
	BlockToolCall
)

// BlockOrder records the order in which the blocks of a streamed model
// answer began: its thinking blocks, its runs of text and its tool calls.
// An answer sent back to the model goes in that order: an Anthropic model
// with thinking refuses a continuation whose assistant turn lacks its
// signed thinking blocks, complete and in place (a thinking block's
// signature covers what came before it). The agent loop and the gateway's
// whole Anthropic responses record it.
type BlockOrder struct {
	Blocks []OrderedBlock
	text   int // the bytes of text seen
}

// OrderedBlock is one block: a thinking block (Index:
// ThinkingDelta.Index) or a tool call (Index: ToolCallDelta.Index) by its
// delta's index, a run of text by its bytes [From, To) of the answer's
// text, Refusal when the text was marked a refusal (Delta.Refusal).
type OrderedBlock struct {
	Kind, Index, From, To int
	Refusal               bool
}

// Add records the blocks d begins, in the order a delta's parts are
// written: its thinking, its text, its tool calls. A block's place is that
// of its first fragment; text runs on in one block until another block, or
// a refusal's text after an answer's (or the reverse), begins.
func (o *BlockOrder) Add(d *Delta) {
	if t := d.Thinking; t != nil && t.Index >= 0 && !o.Seen(BlockThinking, t.Index) {
		o.Blocks = append(o.Blocks, OrderedBlock{Kind: BlockThinking, Index: t.Index})
	}
	if d.Text != "" {
		n := len(o.Blocks)
		if n == 0 || o.Blocks[n-1].Kind != BlockText || o.Blocks[n-1].Refusal != d.Refusal {
			o.Blocks = append(o.Blocks, OrderedBlock{Kind: BlockText, From: o.text, To: o.text, Refusal: d.Refusal})
			n++
		}
		o.text += len(d.Text)
		o.Blocks[n-1].To = o.text
	}
	for _, f := range d.ToolCalls {
		if !o.Seen(BlockToolCall, f.Index) {
			o.Blocks = append(o.Blocks, OrderedBlock{Kind: BlockToolCall, Index: f.Index})
		}
	}
}

// Seen reports whether a block of kind and index was recorded.
func (o *BlockOrder) Seen(kind, index int) bool {
	return slices.ContainsFunc(o.Blocks, func(b OrderedBlock) bool { return b.Kind == kind && b.Index == index })
}

// message returns the assistant message of the answer: text, its thinking
// blocks (ThinkingBuilder.Blocks) and its tool calls (ToolCallBuilder.
// ToolCalls, ordered by index: the k-th smallest index recorded is the
// k-th call). Without thinking it is the text as Content, the calls after
// it. With thinking, the thinking blocks and the runs of text are parts in
// the order they began, each call placed among them where it began
// (ToolUse.PartsAfter), so that Message.Blocks yields the answer as the
// model wrote it. A thinking block with neither text nor signature (an
// index skipped) is left out; one the order lacks goes first, a call it
// lacks last. calls are updated in place.
func (o *BlockOrder) message(text string, thinking []ContentPart, calls []ToolUse) Message {
	msg := Message{Role: "assistant", ToolCalls: calls}
	if len(thinking) == 0 {
		msg.Content = text
		return msg
	}
	var indexes []int
	for _, b := range o.Blocks {
		if b.Kind == BlockToolCall {
			indexes = append(indexes, b.Index)
		}
	}
	slices.Sort(indexes)
	keep := func(i int) bool { return thinking[i].Text != "" || thinking[i].Signature != "" }
	var parts []ContentPart
	for i := range thinking {
		if keep(i) && !o.Seen(BlockThinking, i) {
			parts = append(parts, thinking[i])
		}
	}
	place := make([]int, len(calls))
	for k := range place {
		place[k] = -1
	}
	textRun := false // the last block was text: a refusal's text after an answer's runs on in its part
	for _, b := range o.Blocks {
		switch b.Kind {
		case BlockThinking:
			if b.Index < len(thinking) && keep(b.Index) {
				parts = append(parts, thinking[b.Index])
			}
		case BlockText:
			if b.To <= len(text) {
				if textRun {
					parts[len(parts)-1].Text += text[b.From:b.To]
				} else {
					parts = append(parts, ContentPart{Type: PartText, Text: text[b.From:b.To]})
				}
			}
		case BlockToolCall:
			if k, _ := slices.BinarySearch(indexes, b.Index); k < len(calls) && place[k] < 0 {
				place[k] = len(parts)
			}
		}
		textRun = b.Kind == BlockText && b.To <= len(text)
	}
	msg.Parts = parts
	// The calls keep their order among themselves: a call never goes
	// before the place of the call before it.
	last := 0
	for k := range calls {
		p := place[k]
		if p < 0 {
			p = len(parts)
		}
		last = max(p, last)
		calls[k].PartsAfter = len(parts) - last
	}
	return msg
}
