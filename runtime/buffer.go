package runtime

import (
	"context"
	"slices"
	"strings"
)

// Buffered is a chat stream that a layer held back to decide on the whole
// response before anything reaches the consumer (a guard, a judge, an output
// check).
type Buffered struct {
	// Held are the deltas next yielded, in order.
	Held []Delta
	// Text is the concatenated text of Held.
	Text string
	// ToolCalls are the tool calls assembled from the fragments of Held.
	ToolCalls []ToolUse
	// Refusal reports that a delta of Held marked its text a refusal.
	Refusal bool
}

// Buffer runs next on c and holds every delta it yields instead of passing it
// on. When next returns, c.Deltas is restored to its value before the call:
// nothing got past this layer yet, so a failure of next still reads as
// pre-stream to the layers above. The other stream fields (Served, Usage,
// Stopped) are left as next set them.
//
// Buffer returns what arrived and next's error; on error the held deltas are
// still returned (what arrived before the failure) but are normally dropped.
// The caller delivers the deltas it accepts with Release or its own c.Emit.
func Buffer(ctx context.Context, c *ChatCall, next ChatHandler) (Buffered, error) {
	var held []Delta
	var text strings.Builder
	var calls ToolCallBuilder
	refusal := false
	start := c.Deltas
	err := next(ctx, c, func(d Delta) bool {
		held = append(held, d)
		text.WriteString(d.Text)
		refusal = refusal || d.Refusal
		calls.Add(&d)
		return true
	})
	c.Deltas = start // nothing got past this layer yet
	return Buffered{Held: held, Text: text.String(), ToolCalls: calls.ToolCalls(), Refusal: refusal}, err
}

// Release pushes the held deltas to yield in order with c.Emit, which counts
// each delta it pushes in c.Deltas. It stops at the first delta the consumer
// refuses (that one is counted too, and c.Stopped is set) and reports whether
// every held delta was taken.
func (b Buffered) Release(c *ChatCall, yield func(Delta) bool) bool {
	for _, d := range b.Held {
		if !c.Emit(yield, d) {
			return false
		}
	}
	return true
}

// Usage returns the usage summed over the held deltas: what a layer that
// replaces them with one delta of its own reports on that delta.
func (b Buffered) Usage() Usage {
	var u Usage
	for i := range b.Held {
		u.Add(b.Held[i].Usage)
	}
	return u
}

// HoldToolCalls runs next on c and passes its output on as it arrives while
// holding back the tool calls, so that a layer can check or rewrite them
// whole before they reach the consumer (arguments arrive in fragments that
// are not JSON on their own). Until the first tool-call fragment every
// delta passes at once. From then on the fragments are held, and so is the
// thinking that follows a call (Anthropic's interleaved thinking: thinking,
// tool_use, thinking, tool_use...), in its place: a signed block sent back
// out of its place, or without the blocks between the calls, does not
// continue the turn. A delta's text (with its usage) passes at once, unless
// the request asks for thinking or thinking already arrived: text is then
// held in its place too, as a thinking block's signature covers what came
// before it. The finish reason and the usage of the deltas held are held.
//
// When next succeeds with calls held, check gets the assembled calls
// (ordered by index): an error drops everything held and is returned;
// otherwise the calls it returns are released, each whole, one fragment,
// in the place of its first fragment (see WholeToolCalls), with the
// thinking and text held between them; calls next to each other go out in
// one delta, and the last delta carries the held finish reason and usage.
// When next fails, what was held is dropped. c.Deltas counts the deltas
// that got past the layer. A stream without tool calls passes through
// unchanged, and check is not called.
func HoldToolCalls(ctx context.Context, c *ChatCall, next ChatHandler, yield func(Delta) bool,
	check func([]ToolUse) ([]ToolUse, error)) error {
	start := c.Deltas
	// One struct, so the closures capture one heap variable; what holds
	// the calls is made when the first fragment arrives, so an answer
	// without calls pays nothing for it.
	var h struct {
		emitted int
		inPlace bool
		stopped bool
		t       *toolHold
	}
	h.inPlace = c.Request.Thinking != nil
	pass := func(d Delta) bool {
		h.emitted++
		if !yield(d) {
			h.stopped = true
			c.Stopped = true
			return false
		}
		return true
	}
	err := next(ctx, c, func(d Delta) bool {
		if h.stopped {
			return false
		}
		h.inPlace = h.inPlace || d.Thinking != nil
		if len(d.ToolCalls) == 0 && h.t == nil {
			return pass(d)
		}
		began := h.t != nil
		if !began {
			h.t = &toolHold{}
		}
		t := h.t
		if d.FinishReason != "" {
			t.tail.FinishReason, t.tail.StopSequence = d.FinishReason, d.StopSequence
		}
		// A delta's thinking and text come before its tool calls (as the
		// stream writers write them): before the first call they pass.
		now := Delta{Text: d.Text, Refusal: d.Refusal}
		var later Delta
		if !began {
			now.Thinking = d.Thinking
		} else if d.Thinking != nil {
			th := *d.Thinking
			later.Thinking = &th
		}
		if h.inPlace && began {
			later.Text, later.Refusal, now.Text = d.Text, d.Refusal, ""
		}
		if len(d.ToolCalls) > 0 {
			// The arguments are kept once, by the builder: the place
			// of a call is the delta of its first fragment, which is
			// all WholeToolCalls reads of the fragments held.
			at := len(t.firsts)
			for _, f := range d.ToolCalls {
				if t.calls.find(f.Index) == nil {
					t.firsts = append(t.firsts, ToolCallDelta{Index: f.Index})
				}
			}
			if len(t.firsts) > at {
				later.ToolCalls = t.firsts[at:len(t.firsts):len(t.firsts)]
			}
			t.calls.Add(&d)
		}
		if later.Thinking != nil || later.Text != "" || later.ToolCalls != nil {
			t.held = append(t.held, later)
		}
		if now.Text != "" || now.Thinking != nil {
			now.Usage = d.Usage
			return pass(now)
		}
		t.tail.Usage.Add(d.Usage)
		return true
	})
	defer func() { c.Deltas = start + h.emitted }()
	if err != nil || h.stopped || h.t == nil || h.t.calls.Len() == 0 {
		return err
	}
	t := h.t
	out, cerr := check(t.calls.ToolCalls())
	if cerr != nil {
		return cerr
	}
	held := t.held
	WholeToolCalls(held, out)
	var rel []Delta
	for _, d := range held {
		switch {
		case d.Thinking == nil && d.Text == "" && d.ToolCalls == nil:
			continue // the later fragments of a call
		case d.Thinking == nil && d.Text == "" && len(rel) > 0 && rel[len(rel)-1].Thinking == nil && rel[len(rel)-1].Text == "":
			last := &rel[len(rel)-1]
			last.ToolCalls = append(last.ToolCalls, d.ToolCalls...)
			continue
		}
		rel = append(rel, d)
	}
	if len(rel) == 0 {
		rel = append(rel, Delta{})
	}
	last := &rel[len(rel)-1]
	last.FinishReason, last.StopSequence, last.Usage = t.tail.FinishReason, t.tail.StopSequence, t.tail.Usage
	for _, d := range rel {
		if !pass(d) {
			break
		}
	}
	return nil
}

// toolHold is what HoldToolCalls holds once a call began.
type toolHold struct {
	calls ToolCallBuilder
	// held are, after a call began, the deltas kept in place: the first
	// fragment of each call (its index alone) and the thinking and text
	// between them.
	held []Delta
	// firsts backs the fragments of held.
	firsts []ToolCallDelta
	tail   Delta // the finish reason and usage held after a call began
}

// WholeToolCalls rewrites held, deltas whose tool-call fragments were held
// back, so that each call of calls goes whole (one fragment) in the delta
// of its first fragment, indexed by its place among calls; its later
// fragments are left out. calls[k] takes the place of the k-th smallest
// index among the fragments (the order of ToolCallBuilder.ToolCalls);
// calls beyond those go with the last call begun, and a place left without
// a call keeps none. Each rewritten delta gets a slice of its own; the
// rest of held is left as it is.
func WholeToolCalls(held []Delta, calls []ToolUse) {
	var indexes []int
	for _, d := range held {
		for _, f := range d.ToolCalls {
			indexes = append(indexes, f.Index)
		}
	}
	slices.Sort(indexes)
	indexes = slices.Compact(indexes)
	placed := make([]bool, len(indexes))
	lastBegun, begun := -1, 0
	for i := range held {
		fragments := held[i].ToolCalls
		if fragments == nil {
			continue
		}
		var whole []ToolCallDelta
		for _, f := range fragments {
			k, _ := slices.BinarySearch(indexes, f.Index)
			if placed[k] {
				continue
			}
			placed[k] = true
			if begun++; begun == len(indexes) {
				lastBegun = i
			}
			if k < len(calls) {
				whole = append(whole, wholeCall(k, calls[k]))
			}
		}
		held[i].ToolCalls = whole
	}
	for k := len(indexes); k < len(calls) && lastBegun >= 0; k++ {
		held[lastBegun].ToolCalls = append(held[lastBegun].ToolCalls, wholeCall(k, calls[k]))
	}
}
