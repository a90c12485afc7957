package linehold

import (
	"context"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// Filter is what a layer does to the text Stream holds.
type Filter struct {
	// Releasable returns how many bytes of buf, the text held so far, may
	// be released now; 0 holds all of it. Nil releases up to the last line
	// break.
	Releasable func(buf string) int
	// Clean returns the text to release in place of text (text itself, or
	// a rewritten copy). An error ends the stream: the text is never
	// released and Stream returns the error.
	Clean func(text string) (string, error)
}

// LastLine releases up to the last line break of buf: the default of
// Filter.Releasable.
func LastLine(buf string) int { return strings.LastIndexByte(buf, '\n') + 1 }

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
func Stream(ctx context.Context, c *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool, f Filter) error {
	releasable := f.Releasable
	if releasable == nil {
		releasable = LastLine
	}
	start := c.Deltas
	emitted := 0
	var pending strings.Builder
	var usage runtime.Usage
	finish := ""
	refusal := false // the text held is a refusal (runtime.Delta.Refusal)
	stopped := false
	var failed error
	release := func(text string, d runtime.Delta) bool {
		d.Text, failed = f.Clean(text)
		if failed != nil {
			return false
		}
		d.Refusal = refusal && d.Text != ""
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
	err := next(ctx, c, func(d runtime.Delta) bool {
		if stopped || failed != nil {
			return false
		}
		pending.WriteString(d.Text)
		refusal = refusal || d.Refusal && d.Text != ""
		usage.Add(d.Usage)
		if d.FinishReason != "" {
			finish = d.FinishReason
		}
		if len(d.ToolCalls) > 0 {
			text := pending.String()
			pending.Reset()
			fr := finish
			finish = ""
			return release(text, runtime.Delta{ToolCalls: d.ToolCalls, FinishReason: fr})
		}
		buf := pending.String()
		cut := releasable(buf)
		if cut == 0 {
			return true
		}
		pending.Reset()
		pending.WriteString(buf[cut:])
		return release(buf[:cut], runtime.Delta{})
	})
	if failed == nil && err == nil && !stopped && !c.Stopped && (pending.Len() > 0 || !usage.IsZero() || finish != "") {
		release(pending.String(), runtime.Delta{FinishReason: finish})
	}
	c.Deltas = start + emitted
	if failed != nil {
		return failed
	}
	return err
}
