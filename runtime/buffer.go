package runtime

import (
	"context"
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

// HoldToolCalls runs next on c and passes its text on as it arrives while
// holding back the tool calls, so that a layer can check or rewrite them
// whole before they reach the consumer (arguments arrive in fragments that
// are not JSON on their own). A delta's text (with its usage) passes at
// once; its tool-call fragments are held, and so are the finish reason and
// usage of deltas that carry no text once a call has begun. When next
// succeeds with calls held, check gets the assembled calls: an error drops
// them and is returned; otherwise the calls it returns are released as one
// delta, one fragment each, with the held finish reason and usage. When next
// fails, held calls are dropped. c.Deltas counts the deltas that got past
// the layer. A stream without tool calls passes through unchanged, and check
// is not called.
func HoldToolCalls(ctx context.Context, c *ChatCall, next ChatHandler, yield func(Delta) bool,
	check func([]ToolUse) ([]ToolUse, error)) error {
	start := c.Deltas
	emitted := 0
	var calls ToolCallBuilder
	var held Delta // the finish reason and usage held after a call began
	stopped := false
	pass := func(d Delta) bool {
		emitted++
		if !yield(d) {
			stopped = true
			c.Stopped = true
			return false
		}
		return true
	}
	err := next(ctx, c, func(d Delta) bool {
		if stopped {
			return false
		}
		if len(d.ToolCalls) == 0 && calls.Len() == 0 {
			return pass(d)
		}
		calls.Add(&d)
		if d.FinishReason != "" {
			held.FinishReason = d.FinishReason
		}
		if d.Text != "" {
			return pass(Delta{Text: d.Text, Refusal: d.Refusal, Usage: d.Usage})
		}
		held.Usage.Add(d.Usage)
		return true
	})
	defer func() { c.Deltas = start + emitted }()
	if err != nil || stopped || calls.Len() == 0 {
		return err
	}
	out, cerr := check(calls.ToolCalls())
	if cerr != nil {
		return cerr
	}
	held.ToolCalls = ToolCallDeltas(out)
	pass(held)
	return nil
}
