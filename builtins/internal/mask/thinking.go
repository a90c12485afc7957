package mask

import (
	"fmt"
	"slices"

	"github.com/agentc-dev/agentc/runtime"
)

// Thinking returns msgs without the thinking blocks whose text holds what t.Mask masks, and
// whether any was left out; msgs is never modified. A text found clean is recorded for the
// run (t.Seen).
//
// A thinking block is signed: the model that wrote it checks, when it is sent back, that
// neither its text nor its signature changed, so a masked block is refused (Anthropic's API
// answers 400), and the signature itself may carry the whole thinking encrypted, which the
// model reads whatever the text says. Masking is therefore no choice: a block holding what
// the layer masks is left out of the call's copy, which the API takes as it takes an earlier
// turn without its thinking (it reads none of those anyway). The last assistant message's
// blocks are another matter when the call (req) asks for thinking: a turn that is going on (a
// tool-use loop) cannot be continued without them, and the API refuses it; the call fails
// then, with a permanent error of layer naming the block and what it holds (finding: "a
// secret"), rather than send it or a transcript the API refuses. So does one whose assistant
// message would be left empty. A redacted_thinking block is encrypted: no one but the model
// can read it, and it is sent as it is.
func (t Transcript) Thinking(run string, req *runtime.ChatRequest, msgs []runtime.Message, layer, finding string) ([]runtime.Message, bool, error) {
	on := req.Thinking != nil && req.Thinking.Type != "disabled"
	last := -1
	for i := range msgs {
		if msgs[i].Role == "assistant" {
			last = i
		}
	}
	held := func(p runtime.ContentPart) bool {
		if p.Type != runtime.PartThinking {
			return false
		}
		_, masked := t.text(run, p.Text)
		return masked
	}
	fail := func(i, j int, why string) error {
		return &runtime.CallError{Kind: runtime.KindPermanent, Layer: layer, Message: fmt.Sprintf(
			"messages[%d].parts[%d]: the thinking block holds %s, which its signature forbids masking, and %s", i, j, finding, why)}
	}
	var out []runtime.Message
	for i := range msgs {
		msg := &msgs[i]
		first := slices.IndexFunc(msg.Parts, held)
		if first < 0 {
			continue
		}
		if on && i == last {
			return nil, false, fail(i, first, "the turn it belongs to cannot go on without it")
		}
		// The tool calls stay in their place among the parts left
		// (interleaved thinking sits between them).
		kept := msg.DeleteParts(held)
		if kept.Content == "" && len(kept.Parts) == 0 && len(kept.ToolCalls) == 0 {
			return nil, false, fail(i, first, "the message is nothing else")
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i] = kept
	}
	if out == nil {
		return msgs, false, nil
	}
	return out, true, nil
}
