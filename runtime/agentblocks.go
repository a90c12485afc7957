package runtime

import "slices"

// The kinds of block of a model answer (answerBlocks).
const (
	answerThinking = iota
	answerText
	answerCall
)

// answerBlocks records the order in which the blocks of a streamed model
// answer began: its thinking blocks, its runs of text and its tool calls.
// An agent turn sends the answer back to the model in that order: an
// Anthropic model with thinking refuses a continuation whose assistant
// turn lacks its signed thinking blocks, complete and in place.
type answerBlocks struct {
	blocks []answerBlock
	text   int // the bytes of text seen
}

// answerBlock is one block: a thinking block or a tool call by its
// delta's index, a run of text by its bytes [from, to) of the answer's
// text.
type answerBlock struct {
	kind, index, from, to int
}

// add records the blocks d begins, in the order a delta's parts are
// written: its thinking, its text, its tool calls. Text runs on in one
// block until another block begins.
func (o *answerBlocks) add(d *Delta) {
	if t := d.Thinking; t != nil && t.Index >= 0 && !o.seen(answerThinking, t.Index) {
		o.blocks = append(o.blocks, answerBlock{kind: answerThinking, index: t.Index})
	}
	if d.Text != "" {
		n := len(o.blocks)
		if n == 0 || o.blocks[n-1].kind != answerText {
			o.blocks = append(o.blocks, answerBlock{kind: answerText, from: o.text})
			n++
		}
		o.text += len(d.Text)
		o.blocks[n-1].to = o.text
	}
	for _, f := range d.ToolCalls {
		if !o.seen(answerCall, f.Index) {
			o.blocks = append(o.blocks, answerBlock{kind: answerCall, index: f.Index})
		}
	}
}

// seen reports whether a block of kind and index was recorded.
func (o *answerBlocks) seen(kind, index int) bool {
	return slices.ContainsFunc(o.blocks, func(b answerBlock) bool { return b.kind == kind && b.index == index })
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
func (o *answerBlocks) message(text string, thinking []ContentPart, calls []ToolUse) Message {
	msg := Message{Role: "assistant", ToolCalls: calls}
	if len(thinking) == 0 {
		msg.Content = text
		return msg
	}
	var indexes []int
	for _, b := range o.blocks {
		if b.kind == answerCall {
			indexes = append(indexes, b.index)
		}
	}
	slices.Sort(indexes)
	keep := func(i int) bool { return thinking[i].Text != "" || thinking[i].Signature != "" }
	var parts []ContentPart
	for i := range thinking {
		if keep(i) && !o.seen(answerThinking, i) {
			parts = append(parts, thinking[i])
		}
	}
	place := make([]int, len(calls))
	for k := range place {
		place[k] = -1
	}
	for _, b := range o.blocks {
		switch b.kind {
		case answerThinking:
			if b.index < len(thinking) && keep(b.index) {
				parts = append(parts, thinking[b.index])
			}
		case answerText:
			if b.to <= len(text) {
				parts = append(parts, ContentPart{Type: PartText, Text: text[b.from:b.to]})
			}
		case answerCall:
			if k, _ := slices.BinarySearch(indexes, b.index); k < len(calls) && place[k] < 0 {
				place[k] = len(parts)
			}
		}
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
