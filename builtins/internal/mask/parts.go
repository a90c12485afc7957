package mask

import (
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// Item is what a layer found in a text: the text [From, To) its rule matched, of which the
// part [Start, End) is replaced by With (a password's value is masked, "password=" kept).
// Label is what the layer calls it (pii: its kind); mask does not read it.
type Item struct {
	From, To   int
	Start, End int
	With       string
	Label      string
}

// Find returns the items of a text, in order, their masked parts not overlapping.
type Find func(text string) []Item

// AcrossParts returns msgs with the items that run across two text pieces of a message (its
// content and its text parts) masked, and whether anything was. A provider sends the pieces as
// separate blocks, which a model reads run together (a tool message's pieces as one result,
// joined by line breaks), so a value cut in two ("4111 1111" and " 1111 1111", "sk-proj-abc"
// and "def...") reaches it whole though neither piece holds it; the pieces are read run
// together and joined by line breaks. With turns, the pieces of consecutive messages of one
// role (user, assistant or system) are read so too: Anthropic's API merges consecutive user or
// assistant messages into one turn, and sends the system messages as the blocks of one system
// prompt (the layer reads consecutive ones together). The placeholder takes the place of the
// masked part of the item in the first piece it starts in; its parts in the pieces after it
// are removed, and the rest of every piece is kept. Messages of role "system" are read as
// Messages reads them (t.System). msgs is never modified; a message that changed is a copy.
func (t Transcript) AcrossParts(msgs []runtime.Message, find Find, turns bool) ([]runtime.Message, bool) {
	var out []runtime.Message
	for i := 0; i < len(msgs); {
		msg := &msgs[i]
		if msg.Role == "system" && !t.System && !scanned.IsGrounding(msg) {
			i++
			continue
		}
		// The run of messages read together: msgs[i:j].
		j := i + 1
		if turns && !scanned.IsGrounding(msg) && (msg.Role == "user" || msg.Role == "assistant" || msg.Role == "system") {
			for j < len(msgs) && msgs[j].Role == msg.Role && !scanned.IsGrounding(&msgs[j]) {
				j++
			}
		}
		var pieces []string
		counts := make([]int, j-i)
		for k := i; k < j; k++ {
			p := textPieces(&msgs[k])
			pieces = append(pieces, p...)
			counts[k-i] = len(p)
		}
		from := i
		i = j
		if nonEmpty(pieces) < 2 {
			continue
		}
		pieces, found := Across(pieces, find, "", "\n")
		if len(found) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		for k, n := range counts {
			mine := pieces[:n]
			pieces = pieces[n:]
			if !slices.Equal(mine, textPieces(&msgs[from+k])) {
				out[from+k] = withPieces(&msgs[from+k], mine)
			}
		}
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

// textPieces returns the content and the text parts of msg, in the order scanned.RunTogether
// reads them; an empty one is kept, so that the pieces match the message's texts one to one.
func textPieces(msg *runtime.Message) []string {
	pieces := []string{msg.Content}
	for _, p := range msg.Parts {
		if p.Type == runtime.PartText {
			pieces = append(pieces, p.Text)
		}
	}
	return pieces
}

func nonEmpty(pieces []string) int {
	n := 0
	for _, p := range pieces {
		if p != "" {
			n++
		}
	}
	return n
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

// Across returns pieces with the items find finds in them read together, joined by each of
// seps in turn, that run across two pieces or more masked, and those items (their offsets
// are those of the joined text); without any, it returns pieces itself. The placeholder
// takes the place of the masked part of an item in the first piece it starts in, its parts
// in the pieces after it are removed, and the rest of every piece is kept.
func Across(pieces []string, find Find, seps ...string) ([]string, []Item) {
	var found []Item
	for _, sep := range seps {
		var items []Item
		pieces, items = maskJoined(pieces, sep, find)
		found = append(found, items...)
	}
	return pieces, found
}

// AcrossElements is Across for the consecutive strings of an array (jsonvalue.StringRuns),
// read as a list of lines: joined by line breaks. A value a tool hands over as its lines (a
// private key, a card number wrapped after a group) is found whole. They are not read run
// together: the model reads quotes and commas between them, and an item ending one element
// would otherwise take in the start of the next ("bob@example.com", "ok").
func AcrossElements(elems []string, find Find) ([]string, []Item) {
	return Across(elems, find, "\n")
}

// Elements returns the function jsonvalue.MapTextJoined reads the runs of consecutive strings
// of an array with: AcrossElements, counting the items masked; nil for a nil find.
func Elements(find Find) func([]string) ([]string, int) {
	if find == nil {
		return nil
	}
	return func(elems []string) ([]string, int) {
		out, found := AcrossElements(elems, find)
		return out, len(found)
	}
}

// maskJoined finds the items of pieces joined by sep that run across two pieces or more, and
// returns the pieces with them masked, and the items.
func maskJoined(pieces []string, sep string, find Find) ([]string, []Item) {
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
	var found []Item
	for _, it := range find(b.String()) {
		// An item within one piece is masked with the piece itself.
		first := -1
		for k, p := range pieces {
			if max(it.From, starts[k]) < min(it.To, starts[k]+len(p)) {
				first = k
				break
			}
		}
		if first < 0 || it.To <= starts[first]+len(pieces[first]) {
			continue
		}
		placed := false
		for k, p := range pieces {
			s, e := max(it.Start, starts[k]), min(it.End, starts[k]+len(p))
			if s >= e {
				continue
			}
			with := ""
			if !placed {
				with, placed = it.With, true
			}
			edits[k] = append(edits[k], edit{s - starts[k], e - starts[k], with})
		}
		if placed {
			found = append(found, it)
		}
	}
	if len(found) == 0 {
		return pieces, nil
	}
	out := slices.Clone(pieces)
	for k, es := range edits {
		for j := len(es) - 1; j >= 0; j-- {
			out[k] = out[k][:es[j].start] + es[j].with + out[k][es[j].end:]
		}
	}
	return out, found
}
