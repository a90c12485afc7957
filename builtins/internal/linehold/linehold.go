package linehold

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
	"github.com/agentc-dev/agentc/runtime"
)

// Filter is what a layer does to the text Stream holds.
type Filter struct {
	// Releasable returns how many bytes of buf, the text held so far, may
	// be released now; 0 holds all of it. h is the stream's Hold, for
	// Hold.Encoded and Hold.Unclosed. Nil releases up to the last line
	// break. It decides on the text up to buf's last line break: Stream
	// does not call it again while the text it held whole grows by text
	// without a line break (held whole again), so that a stream of
	// many small deltas is not read again at each of them.
	Releasable func(buf string, h *Hold) int
	// Clean returns the text to release in place of text (text itself, or
	// a rewritten copy). An error ends the stream: the text is never
	// released and Stream returns the error. A thinking block's text is
	// clean when Clean returns it unchanged without an error.
	Clean func(text string) (string, error)
	// CleanAfter, when set, is Clean for the streamed text: before is
	// the end of the text released so far as the model wrote it (its
	// last Lookback bytes, whole characters, or what Tail keeps), which an item in text may
	// depend on (a phone word on the line before a number: "call me
	// on" then "9472 7916"); Clean is left for the thinking blocks.
	CleanAfter func(before, text string) (string, error)
	// Lookback bounds before (CleanAfter).
	Lookback int
	// Tail, when set, returns before for the next part in place of the
	// last Lookback bytes: what to keep of before followed by text, the
	// part released (a layer whose reading skips characters keeps as
	// many bytes as hold what it reads back).
	Tail func(before, text string) string
	// Layer is the layer's name and Finding what Clean finds ("a
	// secret"), for the error that ends a stream whose tool calls follow
	// a thinking block left out.
	Layer, Finding string
}

// LastLine releases up to the last line break of buf: the default of
// Filter.Releasable.
func LastLine(buf string) int { return strings.LastIndexByte(buf, '\n') + 1 }

// Hold is what one stream's hold of encoded runs (Encoded) knows of the text the stream holds:
// how much of it is the text it held at the last call of Filter.Releasable, unchanged, and
// where the runs that ended it start (textnorm.Walk), so that a run held over many lines
// (a dump of a large file, a long base64 payload) has each of its lines walked once while it
// is held, not once for each line added after it.
type Hold struct {
	same                 int // the bytes of the held text held, unchanged, at the last call
	wrapped, dump, bytes textnorm.Walk
	open                 unclosed
	rest                 bool // Rest was called
}

// Rest holds the rest of the stream to its end: Stream releases what
// Filter.Releasable returns at this call, and then nothing more until the
// stream ends (or a tool call arrives), when the rest goes out as Filter.Clean
// makes it, whole. A filter calls it when it cannot tell within its bounds
// where the text may be cut: it fails closed, trading the rest of the
// stream's latency for the whole reading.
func (h *Hold) Rest() { h.rest = true }

// unclosed is what Hold.Unclosed found in the text held since the last
// release: it read the text up to read (0: none of it), and the last opener
// in it that no closer follows starts at at (-1 for none).
type unclosed struct {
	read, at int
}

// released forgets what was read of the text held: a part of it was
// released, and the rest is held from its start.
func (h *Hold) released() {
	h.same = 0
	h.open = unclosed{}
}

// Unclosed returns where the last opener in buf[:cut] starts that no
// closer follows (a private key's block begun and not ended), or -1. Of
// a text held since it last read it, and grown since, it reads only what
// was added, so that a block held open over many lines has each of its
// lines read once while it is held. opener must not be found inside
// closer, nor closer inside opener, and both must be the same at each
// call of one stream.
func (h *Hold) Unclosed(buf string, cut int, opener, closer string) int {
	o := &h.open
	from := 0
	if o.read > 0 && o.read <= cut {
		// buf[:o.read] was read: a match may start at most a match's
		// length before its end.
		from = max(0, o.read-max(len(opener), len(closer))+1)
	} else {
		o.at = -1
	}
	text := buf[:cut]
	if k := strings.LastIndex(text[from:], opener); k >= 0 {
		o.at = from + k
	}
	if o.at >= 0 && strings.Contains(text[max(o.at, from):], closer) {
		o.at = -1
	}
	o.read = cut
	return o.at
}

// Encoded returns cut, or, when buf[:cut] ends in a line break after a run of base64 that
// the lines still to come may go on with (textnorm.WrappedRunStart: a value's encoding
// wrapped over lines), after lines of a hex dump (textnorm.DumpRunStart) or after bytes of
// hex with separators (textnorm.HexRunStart: a byte array wrapped over lines), the start of
// the line that run starts in, so that the run is released whole, read as one, once it ends.
func (h *Hold) Encoded(buf string, cut int) int {
	text := buf[:cut]
	k := -1
	for _, from := range []int{h.wrapped.WrappedRunStart(text, h.same), h.dump.DumpRunStart(text, h.same),
		h.bytes.HexRunStart(text, h.same)} {
		if from >= 0 && (k < 0 || from < k) {
			k = from
		}
	}
	if k >= 0 {
		return strings.LastIndexByte(buf[:k], '\n') + 1
	}
	return cut
}

// Stream runs next on c and passes its streamed text on to yield through
// f: text is held until f.Releasable lets a part of it go, and each part
// goes out as f.Clean makes it. A delta carrying tool calls releases all
// the text held before it, with the calls. At the end of the stream the
// rest is released. Text released after a refusal's text arrived is
// marked a refusal (runtime.Delta.Refusal). Usage reported on held deltas
// rides on the next released one, and the finish reason on the last. When
// the stream fails, held text is dropped, never released unchecked; when
// f.Clean fails, the stream is ended and its error returned (the parts
// before were clean and have gone out). c.Deltas counts the deltas that
// got past the layer.
//
// Thinking (runtime.Delta.Thinking) is held until the text or a tool call
// that follows it arrives, or the stream ends, and is then judged block by
// block. A thinking block is signed, so it cannot be rewritten: one whose
// whole text f.Clean leaves as it is goes out, as one delta, its text and
// signature whole; one whose text f.Clean would change or refuses is left
// out, and the blocks after it are numbered on as if it had never been. A
// redacted_thinking block is encrypted, no one but the model reads it, and
// it goes out as it came. Once a block was left out, the rest of the
// output is held to the end of the stream: when the model goes on to call
// tools, the turn cannot be continued without the block (its model refuses
// an assistant turn of tool calls without its thinking), and the stream
// ends with a permanent *runtime.CallError naming f.Layer and the block,
// nothing of it released (when the block was the first thing the model
// sent, the failure is a pre-stream one for the outer layers); otherwise
// the held thinking and text go out at the end, without the block.
func Stream(ctx context.Context, c *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool, f Filter) error {
	releasable := f.Releasable
	if releasable == nil {
		releasable = func(buf string, _ *Hold) int { return LastLine(buf) }
	}
	var hold Hold
	held := false // releasable held the whole text at its last call
	start := c.Deltas
	emitted := 0
	var pending strings.Builder
	var usage runtime.Usage
	finish := ""
	refusal := false // the text held is a refusal (runtime.Delta.Refusal)
	stopped := false
	var failed error
	th := thoughts{left: -1}
	emit := func(d runtime.Delta) bool {
		d.Usage = usage
		usage = runtime.Usage{}
		emitted++
		if !yield(d) {
			stopped = true
			c.Stopped = true
			return false
		}
		return true
	}
	before := "" // the end of the text released, for f.CleanAfter
	release := func(text string, d runtime.Delta) bool {
		if f.CleanAfter == nil {
			d.Text, failed = f.Clean(text)
		} else {
			d.Text, failed = f.CleanAfter(before, text)
			if f.Tail != nil {
				before = f.Tail(before, text)
			} else {
				before = Tail(before+text[max(0, len(text)-f.Lookback):], f.Lookback)
			}
		}
		if failed != nil {
			return false
		}
		d.Refusal = refusal && d.Text != ""
		return emit(d)
	}
	err := next(ctx, c, func(d runtime.Delta) bool {
		if stopped || failed != nil {
			return false
		}
		usage.Add(d.Usage)
		if d.FinishReason != "" {
			finish = d.FinishReason
		}
		if d.Thinking != nil {
			if failed = th.add(d.Thinking); failed != nil {
				return false
			}
			if d.Text == "" && len(d.ToolCalls) == 0 {
				return true
			}
		}
		if !th.settle(f.Clean, emit) {
			return false
		}
		pending.WriteString(d.Text)
		refusal = refusal || d.Refusal && d.Text != ""
		if len(d.ToolCalls) > 0 {
			if th.left >= 0 {
				failed = f.unsigned(th.left)
				return false
			}
			text := pending.String()
			pending.Reset()
			hold.released()
			held = false
			fr := finish
			finish = ""
			return release(text, runtime.Delta{ToolCalls: d.ToolCalls, FinishReason: fr})
		}
		if th.left >= 0 {
			return true // held to the end: tool calls may still come
		}
		if hold.rest || held && strings.IndexByte(d.Text, '\n') < 0 {
			return true // the text up to its last line break is the one held
		}
		buf := pending.String()
		cut := releasable(buf, &hold)
		if held = cut == 0; held {
			hold.same = len(buf) // held as it is, and appended to
			return true
		}
		hold.released()
		pending.Reset()
		pending.WriteString(buf[cut:])
		return release(buf[:cut], runtime.Delta{})
	})
	if failed == nil && err == nil && !stopped && !c.Stopped && th.settle(f.Clean, emit) && th.flush(emit) &&
		(pending.Len() > 0 || !usage.IsZero() || finish != "") {
		release(pending.String(), runtime.Delta{FinishReason: finish})
	}
	c.Deltas = start + emitted
	if failed != nil {
		return failed
	}
	return err
}

// Tail returns the last n bytes of s, or fewer, so that it starts a
// character.
func Tail(s string, n int) string {
	k := max(0, len(s)-n)
	for k < len(s) && !utf8.RuneStart(s[k]) {
		k++
	}
	return s[k:]
}

// unsigned is the failure of a stream whose tool calls follow the thinking
// block left out.
func (f Filter) unsigned(block int) error {
	return &runtime.CallError{Kind: runtime.KindPermanent, Layer: f.Layer, Message: fmt.Sprintf(
		"the model's thinking block %d holds %s, which its signature forbids masking: the block is left out, "+
			"and the tool calls that follow it cannot be relayed without it (the client could not continue the turn)", block, f.Finding)}
}

// thoughts holds the model's thinking for Stream.
type thoughts struct {
	b       runtime.ThinkingBuilder
	pending bool // fragments arrived that are not judged yet
	judged  int  // the blocks judged
	out     int  // the blocks kept: the index of the next one
	// left is the index (as the model sent it) of the first block left
	// out, -1 for none; held are the blocks kept after it.
	left int
	held []runtime.ThinkingDelta
}

func (t *thoughts) add(f *runtime.ThinkingDelta) error {
	if err := t.b.Add(&runtime.Delta{Thinking: f}); err != nil {
		return err
	}
	t.pending = true
	return nil
}

// settle judges the blocks whose fragments have all arrived. The clean
// ones go out through emit, in order, unless a block was left out (now or
// before): they are held then. It returns false when emit did.
func (t *thoughts) settle(clean func(string) (string, error), emit func(runtime.Delta) bool) bool {
	if !t.pending {
		return true
	}
	t.pending = false
	blocks := t.b.Blocks()
	kept := len(t.held)
	for i := t.judged; i < len(blocks); i++ {
		p := &blocks[i]
		if p.Type == runtime.PartThinking {
			if text, err := clean(p.Text); err != nil || text != p.Text {
				if t.left < 0 {
					t.left = i
				}
				continue
			}
		}
		t.held = append(t.held, runtime.ThinkingDelta{Index: t.out, Redacted: p.Type == runtime.PartRedactedThinking,
			Text: p.Text, Signature: p.Signature})
		t.out++
	}
	t.judged = len(blocks)
	if t.left >= 0 {
		return true
	}
	for i := kept; i < len(t.held); i++ {
		if !emit(runtime.Delta{Thinking: &t.held[i]}) {
			return false
		}
	}
	t.held = nil
	return true
}

// flush releases the blocks held after one left out, at the end of a
// stream that made no tool calls.
func (t *thoughts) flush(emit func(runtime.Delta) bool) bool {
	for i := range t.held {
		if !emit(runtime.Delta{Thinking: &t.held[i]}) {
			return false
		}
	}
	t.held = nil
	return true
}
