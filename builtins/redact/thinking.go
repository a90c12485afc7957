package redact

import (
	"fmt"
	"slices"

	"github.com/agentc-dev/agentc/runtime"
)

// thinking returns msgs without the thinking blocks whose text holds a
// secret, and whether any was left out; msgs is never modified.
//
// A thinking block is signed: the model that wrote it checks, when it is
// sent back, that neither its text nor its signature changed, so a masked
// block is refused (Anthropic's API answers 400), and the signature itself
// may carry the whole thinking encrypted, which the model reads whatever the
// text says. Masking is therefore no choice: a block holding a secret is
// left out of the call's copy, which the API takes as it takes an earlier
// turn without its thinking (it reads none of those anyway). The last assistant message's
// blocks are another matter when the call asks for thinking: a turn that is
// going on (a tool-use loop) cannot be continued without them, and the API
// refuses it; the call fails then, with a permanent error naming the block,
// rather than send the secret or a transcript the API refuses. So does one
// whose assistant message would be left empty. A redacted_thinking block is
// encrypted: no one but the model can read it, and it is sent as it is.
func (m *Middleware) thinking(run string, req *runtime.ChatRequest, msgs []runtime.Message) ([]runtime.Message, bool, error) {
	last := -1
	for i := range msgs {
		if msgs[i].Role == "assistant" {
			last = i
		}
	}
	on := req.Thinking != nil && req.Thinking.Type != "disabled"
	var out []runtime.Message
	for i := range msgs {
		msg := &msgs[i]
		first := slices.IndexFunc(msg.Parts, func(p runtime.ContentPart) bool { return m.heldSecret(run, p) })
		if first < 0 {
			continue
		}
		if on && i == last {
			return nil, false, m.thinkingError(i, first, "the turn it belongs to cannot go on without it")
		}
		// The tool calls stay in their place among the parts left
		// (interleaved thinking sits between them).
		kept := msg.DeleteParts(func(p runtime.ContentPart) bool { return m.heldSecret(run, p) })
		if kept.Content == "" && len(kept.Parts) == 0 && len(kept.ToolCalls) == 0 {
			return nil, false, m.thinkingError(i, first, "the message is nothing else")
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

// heldSecret reports whether p is a thinking block whose text holds a
// secret; a text found clean is recorded for the run.
func (m *Middleware) heldSecret(run string, p runtime.ContentPart) bool {
	if p.Type != runtime.PartThinking || p.Text == "" || m.seen.Has(run, p.Text) {
		return false
	}
	if _, n := m.redactor.Redact(p.Text); n > 0 {
		return true
	}
	m.seen.Add(run, p.Text)
	return false
}

func (m *Middleware) thinkingError(i, j int, why string) error {
	return &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name, Message: fmt.Sprintf(
		"messages[%d].parts[%d]: the thinking block holds a secret, which its signature forbids masking, and %s", i, j, why)}
}
