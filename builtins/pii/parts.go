package pii

import (
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// maskAcrossParts returns msgs with the personal data that runs across two text pieces of a
// message (its content and its text parts) masked, and whether anything was. A provider sends
// the pieces as separate blocks, which a model reads run together, so a card number cut in
// two ("4111 1111" and " 1111 1111") reaches it whole though neither piece holds it; the
// pieces are read run together and joined by line breaks, as action "block" reads them. The
// placeholder takes the place of the part of the item in the first piece it starts in; the
// parts in the pieces after it are removed, and the rest of every piece is kept. msgs is never
// modified; a message that changed is a copy.
func (m *Middleware) maskAcrossParts(msgs []runtime.Message) ([]runtime.Message, bool) {
	var out []runtime.Message
	for i := range msgs {
		msg := &msgs[i]
		if msg.Role == "system" && !m.System && !scanned.IsGrounding(msg) {
			continue
		}
		pieces := textPieces(msg)
		if len(pieces) < 2 {
			continue
		}
		changed := false
		for _, sep := range []string{"", "\n"} {
			if edited, ok := m.maskJoined(pieces, sep); ok {
				pieces, changed = edited, true
			}
		}
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i] = withPieces(msg, pieces)
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

// textPieces returns the content and the text parts of msg, in the order RunTogether reads
// them; an empty one is kept, so that the pieces match the message's texts one to one.
func textPieces(msg *runtime.Message) []string {
	pieces := []string{msg.Content}
	for _, p := range msg.Parts {
		if p.Type == runtime.PartText {
			pieces = append(pieces, p.Text)
		}
	}
	n := 0
	for _, p := range pieces {
		if p != "" {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	return pieces
}

// withPieces returns a copy of msg with its content and text parts replaced by pieces.
func withPieces(msg *runtime.Message, pieces []string) runtime.Message {
	out := *msg
	out.Content = pieces[0]
	out.Parts = slices.Clone(msg.Parts)
	k := 1
	for j := range out.Parts {
		if out.Parts[j].Type == runtime.PartText {
			out.Parts[j].Text = pieces[k]
			k++
		}
	}
	return out
}

// maskJoined finds the items of pieces joined by sep that run across two pieces or more, and
// returns the pieces with them masked.
func (m *Middleware) maskJoined(pieces []string, sep string) ([]string, bool) {
	starts := make([]int, len(pieces))
	var b strings.Builder
	for k, p := range pieces {
		if k > 0 {
			b.WriteString(sep)
		}
		starts[k] = b.Len()
		b.WriteString(p)
	}
	type edit struct {
		start, end int
		with       string
	}
	edits := make([][]edit, len(pieces))
	found := false
	for _, mt := range m.scanner.Find(b.String()) {
		first := -1
		for k, p := range pieces {
			s, e := max(mt.Start, starts[k]), min(mt.End, starts[k]+len(p))
			if s >= e {
				continue
			}
			if first < 0 {
				first = k
			}
			if first == k && mt.End <= starts[k]+len(p) {
				break // within one piece: masked with the piece itself
			}
			with := ""
			if first == k {
				with = Placeholder(mt.Kind)
			}
			edits[k] = append(edits[k], edit{s - starts[k], e - starts[k], with})
			found = true
		}
	}
	if !found {
		return pieces, false
	}
	out := slices.Clone(pieces)
	for k, es := range edits {
		for j := len(es) - 1; j >= 0; j-- {
			out[k] = out[k][:es[j].start] + es[j].with + out[k][es[j].end:]
		}
	}
	return out, true
}
