package mask

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// Item is what a layer found in a text: the text [From, To) its rule matched, of which the
// part [Start, End) is replaced by With (a password's value is masked, "password=" kept).
// Label is what the layer calls it (pii: its kind). EndsAtBreak says that an item ending where
// a string ends is whole: a value of its kind does not run on into the next element of an array
// (an address, a phone number, a card), so ReadElements does not take an item of the same label
// found over it with the next element run together ("bob@example.com", "ok" is an address and
// a word); a secret, which may be cut anywhere (a key in two), leaves it false.
//
// Inside says that the item is a run of an encoding (base64, hex...) masked whole because what
// it decodes to holds a value, with decoded text before and after the value: the characters at
// the run's ends are no part of it. Read run together with the strings around it, a run takes
// in those of their letters that are of its alphabet ("image/png", "file" of "file:///b"), and
// ReadElements leaves an element at an end of such an item as it is when the item's part in
// the others is an Inside item of its own (trimEncoded).
type Item struct {
	From, To    int
	Start, End  int
	With        string
	Label       string
	EndsAtBreak bool
	Inside      bool
}

// Find returns the items of a text, in order, their masked parts not overlapping.
type Find func(text string) []Item

// AcrossParts returns msgs with the items that run across two text pieces of a message (its
// content and its text parts) masked, and whether anything was. A provider sends the pieces as
// separate blocks, which a model reads run together (a tool message's pieces as one result,
// joined by line breaks), so a value cut in two ("4111 1111" and " 1111 1111", "sk-proj-abc"
// and "def...") reaches it whole though neither piece holds it; the pieces are read run
// together and joined by line breaks. With turns, the pieces of the messages of one turn
// (scanned.SentTurnEnd: consecutive messages of one role, user, assistant or system, and the
// tool results and user messages around them, each message's tool_result parts before its
// text) are read so too: Anthropic's API merges consecutive user or assistant messages into
// one turn, sends tool results as the first blocks of the user turn after them, and sends the
// system messages as the blocks of one system prompt, wherever they sit (the layer reads consecutive ones together, then all of them as
// one). Two tool results, each its own block naming its call, are not read together: a turn
// is read in runs of pieces no two results' pieces meet in. The pieces are also given their cut readings (scanned.CutSpans), which find an item
// the pieces around it glue themselves to when run together. The placeholder takes the place of the
// masked part of the item in the first piece it starts in; its parts in the pieces after it
// are removed, and the rest of every piece is kept. Messages of role "system" are read as
// Messages reads them (t.System). msgs is never modified; a message that changed is a copy.
func (t Transcript) AcrossParts(msgs []runtime.Message, find Find, turns bool) ([]runtime.Message, bool) {
	var out []runtime.Message
	// read masks what the pieces of the messages idx, read together, hold across two of them.
	read := func(idx []int) {
		var pieces []string
		var results []int // of each piece, the result it is of (resultOf), or -1
		base := 0
		counts := make([]int, len(idx))
		for k, i := range idx {
			// the pieces of a message masked already (the system prompt after its turns)
			msg := &msgs[i]
			if out != nil {
				msg = &out[i]
			}
			p := textPieces(msg)
			pieces = append(pieces, p...)
			results = append(results, resultOf(msg, base)...)
			base += len(msg.Parts) + 1
			counts[k] = len(p)
		}
		// Two tool results are each its own block, naming its call: the pieces are read
		// together in runs that no two results' pieces meet in.
		changed := false
		for from := 0; from < len(pieces); {
			to := from + 1
			for to < len(pieces) && !(results[to-1] >= 0 && results[to] >= 0 && results[to-1] != results[to]) {
				to++
			}
			if run, ok := readAcross(pieces[from:to], find); ok {
				pieces = append(pieces[:from:from], append(run, pieces[to:]...)...)
				changed = true
			}
			from = to
		}
		if !changed {
			return
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		for k, n := range counts {
			mine := pieces[:n]
			pieces = pieces[n:]
			if i := idx[k]; !slices.Equal(mine, textPieces(&out[i])) {
				out[i] = withPieces(&out[i], mine)
			}
		}
	}
	var sys []int
	for i := 0; i < len(msgs); {
		msg := &msgs[i]
		if msg.Role == "system" && !scanned.IsGrounding(msg) {
			if !t.System {
				i++
				continue
			}
			sys = append(sys, i)
		}
		// The run of messages read together: msgs[i:j].
		j := i + 1
		if turns {
			j = scanned.SentTurnEnd(msgs, i)
		}
		if msg.Role == "system" && !scanned.IsGrounding(msg) {
			for k := i + 1; k < j; k++ {
				sys = append(sys, k)
			}
		}
		idx := make([]int, 0, j-i)
		for k := i; k < j; k++ {
			idx = append(idx, k)
		}
		i = j
		read(idx)
	}
	// Anthropic's API sends the system messages, wherever they sit, as the blocks of one
	// system prompt: those that are not one turn are read together too.
	if turns && len(sys) >= 2 && sys[len(sys)-1]-sys[0] != len(sys)-1 {
		read(sys)
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

// textPieces returns the texts of msg a turn is read from, in the order a provider sends
// them (pieceSlots): its tool_result parts first, then its content and its text parts; an
// empty one is kept, so that the pieces match the message's texts one to one.
func textPieces(msg *runtime.Message) []string {
	slots := pieceSlots(msg)
	pieces := make([]string, len(slots))
	for k, j := range slots {
		if j < 0 {
			pieces[k] = msg.Content
		} else {
			pieces[k] = msg.Parts[j].Text
		}
	}
	return pieces
}

// readAcross returns pieces with the items find finds across two of them masked (Across, read
// run together and joined by line breaks, and their cut readings), and whether it found any.
func readAcross(pieces []string, find Find) ([]string, bool) {
	if nonEmpty(pieces) < 2 {
		return pieces, false
	}
	pieces, found := Across(pieces, find, "", "\n")
	pieces, cut := acrossCuts(pieces, find)
	return pieces, len(found) > 0 || len(cut) > 0
}

// resultOf returns, for each piece of msg (textPieces), the tool result it is of, numbered
// from base (base to base+len(msg.Parts)), or -1 for a text of the message's own: a tool
// message's pieces are all its one result, a tool_result part is a result of its own.
func resultOf(msg *runtime.Message, base int) []int {
	slots := pieceSlots(msg)
	out := make([]int, len(slots))
	for k, j := range slots {
		switch {
		case msg.Role == "tool":
			out[k] = base
		case j >= 0 && msg.Parts[j].Type == runtime.PartToolResult:
			out[k] = base + 1 + j
		default:
			out[k] = -1
		}
	}
	return out
}

// pieceSlots returns where each piece of msg (textPieces) is: -1 for its content, else the
// index of its part. Anthropic's API sends a user message's tool_result blocks before its
// text (scanned.SentTurnEnd reads a turn so); a tool message's content is its result, and
// its parts follow it in order.
func pieceSlots(msg *runtime.Message) []int {
	var slots []int
	if msg.Role != "tool" {
		for j, p := range msg.Parts {
			if p.Type == runtime.PartToolResult {
				slots = append(slots, j)
			}
		}
	}
	slots = append(slots, -1)
	for j, p := range msg.Parts {
		if p.Type == runtime.PartText || msg.Role == "tool" && p.Type == runtime.PartToolResult {
			slots = append(slots, j)
		}
	}
	return slots
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

// withPieces returns a copy of msg with its texts (textPieces) replaced by pieces.
func withPieces(msg *runtime.Message, pieces []string) runtime.Message {
	out := *msg
	out.Parts = slices.Clone(msg.Parts)
	for k, j := range pieceSlots(msg) {
		if j < 0 {
			out.Content = pieces[k]
		} else {
			out.Parts[j].Text = pieces[k]
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
		pieces, items = maskJoined(pieces, sep, find, false)
		found = append(found, items...)
	}
	return pieces, found
}

// maxElementPasses bounds the readings of a run of elements Elements makes: each masks what
// the one before found, which can leave a neighbour that now reads as an item of its own.
const maxElementPasses = 8

// Elements returns the function jsonvalue.MapTextJoined reads the runs of consecutive strings
// of an array (or, with keys, of the values of an object under those keys: ReadFields) with:
// ReadElements, again on what it returns until it finds nothing, counting the items masked;
// nil for a nil find. The elements of a run are read only so, not also one by one.
func Elements(find Find) func(elems, keys []string) ([]string, int) {
	if find == nil {
		return nil
	}
	return func(elems, keys []string) ([]string, int) {
		total := 0
		for range maxElementPasses {
			out, found := readElements(elems, find, keys != nil, keys)
			if len(found) == 0 {
				break
			}
			elems, total = out, total+len(found)
		}
		return elems, total
	}
}

// ElementItem is an item ReadElements found: in the element Elem, its offsets that
// element's, or, with Elem -1, across two elements or more, its offsets those of the text
// the elements were read in (joined by line breaks, run together, or some of each).
type ElementItem struct {
	Item
	Elem int
}

// ReadElements returns elems (the consecutive strings of an array) with every item find
// finds in them masked, and the items; without any, it returns elems itself. The elements are
// read in one text, as a list of lines (joined by line breaks): an item within an element is
// masked in it, and one that runs across elements (a private key sent as its lines, a card
// wrapped after a group) in every element it runs over, the placeholder in the first, its
// parts in the others removed. They are also read run together, for a value cut inside a
// word or a group ("4111 11", "11 1111 1111"; "sk-proj-abc", "def..."; fixed-size chunks of
// a text): an item found so that runs across elements is masked too, with the items of the
// lines it overlaps (the start of a key cut in two is a key of its own) in one placeholder.
// When an item of the lines ends where its element ends, the elements are read a third time,
// run together only there, so that the element before it does not glue itself to the start
// of the item ("x", "password=hun", "ter2"). Not taken when read run together: an item made
// of whole elements of digits of one length (a list of numbers, "1234", "5678", "9012",
// "3456", as a card's groups joined by line breaks alone are a column of numbers). Elements of
// digits alone that are the groups of a card as a payment form posts them ("4111", "1111",
// "1111", "1111"), with no element of digits alone before or after them, are read a last
// time joined by spaces (readGroups).
func ReadElements(elems []string, find Find) ([]string, []ElementItem) {
	return readElements(elems, find, false, nil)
}

// ReadFields is ReadElements for the consecutive string values elems of an object (in the order
// of its keys), keys the keys of elems, one for one: fields of digits alone are numbers whatever
// their lengths (an id, an order number and a postal code), and an item made of whole fields
// of digits is not taken when read run together; fields of digits alone are read as a card's
// groups only when their keys name the parts of one value (cardKeys: "cc1", "cc2"...), not
// whatever they are (an invoice's codes, `{"invoice": "2224", "line": "5568", ...}`).
func ReadFields(elems, keys []string, find Find) ([]string, []ElementItem) {
	return readElements(elems, find, true, keys)
}

// readElements is ReadElements, or, with fields, ReadFields; keys may then be nil, or hold ""
// for a key not known, when no field is of a card group's digits alone.
func readElements(elems []string, find Find, fields bool, keys []string) ([]string, []ElementItem) {
	var (
		reads  []elementRead
		starts = make([]int, len(elems))
	)
	reads = readJoined(reads, elems, starts, find, func(int) string { return "\n" }, false, fields)
	lines := len(reads)
	reads = readJoined(reads, elems, starts, find, func(int) string { return "" }, true, fields)
	// glued[k]: an item of the lines ends where element k-1 ends, which is read run together
	// with element k.
	var glued []bool
	for _, r := range reads[:lines] {
		if last := r.match[len(r.match)-1]; last.end == len(elems[last.k]) && last.k+1 < len(elems) {
			if glued == nil {
				glued = make([]bool, len(elems))
			}
			glued[last.k+1] = true
		}
	}
	if glued != nil {
		reads = readJoined(reads, elems, starts, find, func(k int) string {
			if glued[k] {
				return ""
			}
			return "\n"
		}, true, fields)
	}
	// labels that are words, then, where an element is a snake_case name, labels that are names
	// ("user_id"): read apart, as a name's last word may be the start of a key cut in two
	// ("aws_s", "ecret_access_key=...").
	for i, label := range []func(string) bool{isWord, isName} {
		if i == 1 && !slices.ContainsFunc(elems, func(e string) bool { return isName(e) && !isWord(e) }) {
			break
		}
		if labelled := labelBreaks(elems, label); labelled != nil {
			reads = readJoined(reads, elems, starts, find, func(k int) string {
				if labelled[k] {
					return "\n"
				}
				return ""
			}, true, fields)
		}
	}
	reads = readGroups(reads, elems, find, fields, keys)
	var (
		edits [][]edit
		found []ElementItem
	)
	for _, r := range reads {
		if edits == nil {
			edits = make([][]edit, len(elems))
		}
		for j, sp := range r.masked {
			with := ""
			if j == 0 {
				with = r.With
			}
			edits[sp.k] = append(edits[sp.k], edit{sp.start, sp.end, with})
		}
		found = append(found, r.ElementItem)
	}
	if len(found) == 0 {
		return elems, nil
	}
	out := slices.Clone(elems)
	for k, es := range edits {
		es = mergeEdits(es)
		for j := len(es) - 1; j >= 0; j-- {
			out[k] = out[k][:es[j].start] + es[j].with + out[k][es[j].end:]
		}
	}
	return out, found
}

// mergeEdits returns the edits of one element in order, those that overlap merged into one
// that takes the place of them all, with the placeholders of each (the readings of the
// elements may find an item and a longer one over it).
func mergeEdits(es []edit) []edit {
	slices.SortFunc(es, func(a, b edit) int { return a.start - b.start })
	out := es[:0]
	for _, e := range es {
		if n := len(out); n > 0 && e.start < out[n-1].end {
			last := &out[n-1]
			last.end = max(last.end, e.end)
			if !strings.Contains(last.with, e.with) {
				last.with += e.with
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

// elementRead is an item of ReadElements with the parts of the elements its match and its
// masked part cover.
type elementRead struct {
	ElementItem
	match, masked []piece
}

// readJoined appends to reads the items find finds in elems joined by sep(k) before each
// element k > 0: all of them, or, together, those that do not join a list of numbers
// (numberList), were not read already and, within one element, overlap no item read (the
// text around an element changes what is read in it: "+182476793" and "@123-45-..." read run
// together hold a phone number the lines do not).
func readJoined(reads []elementRead, elems []string, starts []int, find Find, sep func(k int) string, together, fields bool) []elementRead {
	text := joinAt(elems, sep, starts)
	// byElem lists the reads with a part in each element: a read found before is one of those
	// of the elements an item runs over, and looking it up there, not among every read, keeps
	// the cost of a long run of strings (the runs of a JSON document) linear.
	var byElem map[int][]int
	if together {
		byElem = map[int][]int{}
		for i, r := range reads {
			for _, p := range r.match {
				byElem[p.k] = append(byElem[p.k], i)
			}
		}
	}
	for _, it := range find(text) {
		match, masked := pieceSpans(elems, starts, it.From, it.To), pieceSpans(elems, starts, it.Start, it.End)
		if len(match) == 0 || len(masked) == 0 {
			continue
		}
		if it.Inside && len(masked) > 1 {
			it, match, masked = trimEncoded(it, text, starts, match, masked, find)
		}
		if together && (numberList(elems, match, fields) || slices.ContainsFunc(match, func(p piece) bool {
			return slices.ContainsFunc(byElem[p.k], func(i int) bool {
				// read already; or, within one element, where the lines found something; or
				// the same value, whole where its element ends, run on into the next
				r := reads[i]
				return slices.Equal(r.match, match) && slices.Equal(r.masked, masked) || len(match) == 1 && overlaps(match, r.match) ||
					r.EndsAtBreak && r.Label == it.Label && len(r.match) == 1 && r.match[0].end == len(elems[r.match[0].k]) && overlaps(match, r.match)
			})
		})) {
			continue
		}
		fi := ElementItem{Item: it, Elem: -1}
		if len(match) == 1 {
			k := match[0].k
			fi.Elem = k
			fi.From, fi.To, fi.Start, fi.End = it.From-starts[k], it.To-starts[k], it.Start-starts[k], it.End-starts[k]
		}
		reads = append(reads, elementRead{fi, match, masked})
		if together {
			for _, p := range match {
				byElem[p.k] = append(byElem[p.k], len(reads)-1)
			}
		}
	}
	return reads
}

// trimEncoded returns an item of an encoded run (Item.Inside) read over several elements
// without the elements at its ends that are no part of its value: the last, then the first,
// while what the item masks in the others, read alone, is an Inside item of its own, which
// holds its value whole, text of its decoding after and before it. The run read in "data",
// "image/png", "image" is masked in "data" alone; a run cut over two elements, each holding a
// part of what it decodes to, in both. it's offsets, match and masked are those of text, the elements
// joined (starts); the item keeps one element at least.
func trimEncoded(it Item, text string, starts []int, match, masked []piece, find Find) (Item, []piece, []piece) {
	at := func(p piece) (int, int) { return starts[p.k] + p.start, starts[p.k] + p.end }
	holds := func(ps []piece) bool {
		from, _ := at(ps[0])
		_, to := at(ps[len(ps)-1])
		return slices.ContainsFunc(find(text[from:to]), func(it Item) bool { return it.Inside })
	}
	for len(masked) > 1 && holds(masked[:len(masked)-1]) {
		masked = masked[:len(masked)-1]
	}
	for len(masked) > 1 && holds(masked[1:]) {
		masked = masked[1:]
	}
	first, last := masked[0].k, masked[len(masked)-1].k
	match = slices.DeleteFunc(slices.Clone(match), func(p piece) bool { return p.k < first || p.k > last })
	if len(match) == 0 {
		match = masked
	}
	it.From, _ = at(match[0])
	_, it.To = at(match[len(match)-1])
	it.Start, _ = at(masked[0])
	_, it.End = at(masked[len(masked)-1])
	return it, match, masked
}

type edit struct {
	start, end int
	with       string
}

// piece is the part [start, end) of the element k.
type piece struct{ k, start, end int }

// joinAt returns elems joined, sep(k) before each element k > 0, and sets starts to the
// offset of each in it.
func joinAt(elems []string, sep func(k int) string, starts []int) string {
	n := len(elems) - 1
	for _, e := range elems {
		n += len(e)
	}
	var b strings.Builder
	b.Grow(n)
	for k, e := range elems {
		if k > 0 {
			b.WriteString(sep(k))
		}
		starts[k] = b.Len()
		b.WriteString(e)
	}
	return b.String()
}

// pieceSpans returns the parts of the elements that [from, to) of their joined text covers,
// element offsets, in order; a separator it covers is in none.
func pieceSpans(elems []string, starts []int, from, to int) []piece {
	var out []piece
	// The first element that ends after from: the elements' ends rise with their starts.
	first := sort.Search(len(elems), func(k int) bool { return starts[k]+len(elems[k]) > from })
	for k := first; k < len(elems) && starts[k] < to; k++ {
		s, en := max(from, starts[k]), min(to, starts[k]+len(elems[k]))
		if s < en {
			out = append(out, piece{k, s - starts[k], en - starts[k]})
		}
	}
	return out
}

// overlaps reports whether a part of spans overlaps one of others.
func overlaps(spans, others []piece) bool {
	for _, a := range spans {
		for _, b := range others {
			if a.k == b.k && a.start < b.end && b.start < a.end {
				return true
			}
		}
	}
	return false
}

// numberList reports whether spans cover whole elements only, each of them digits, all of
// one length (or, with anyLength, of any lengths): numbers of a list, read together.
func numberList(elems []string, spans []piece, anyLength bool) bool {
	n := len(elems[spans[0].k])
	for _, sp := range spans {
		e := elems[sp.k]
		if sp.start != 0 || sp.end != len(e) || (len(e) != n && !anyLength) || !allDigits(e) {
			return false
		}
	}
	return true
}

// groupLayouts are the lengths of the groups a card number is written in, and a payment form
// posts in boxes of their own: four groups of four digits, and an American Express or Diners
// Club number's 4-6-5 and 4-6-4.
var groupLayouts = [][]int{{4, 4, 4, 4}, {4, 6, 5}, {4, 6, 4}}

// groupDigits reports whether e is digits alone of the length of a card's group (groupLayouts).
func groupDigits(e string) bool {
	return slices.ContainsFunc(groupLayouts, func(layout []int) bool { return slices.Contains(layout, len(e)) }) && allDigits(e)
}

// readGroups appends to reads the items find finds in the runs of elements of elems that are
// the groups of a card (groupLayouts): consecutive elements of digits alone, with no element
// of digits alone before or after them, read joined by spaces, as the number is written
// ("4111 1111 1111 1111"), each run apart from the next by runSep. An item is taken when it
// covers its run whole and no read covers an element of it already. Groups counting up by one
// step are a sequence (counted) and not read so, nor, with fields (the values of an object
// under keys), groups whose keys do not name the parts of one value (cardKeys). Read together,
// such elements are a list of numbers (numberList), and as lines a column.
func readGroups(reads []elementRead, elems []string, find Find, fields bool, keys []string) []elementRead {
	var groups [][2]int
	for k := 0; k < len(elems); {
		if !allDigits(elems[k]) {
			k++
			continue
		}
		j := k + 1
		for j < len(elems) && allDigits(elems[j]) {
			j++
		}
		if slices.ContainsFunc(groupLayouts, func(layout []int) bool {
			return len(layout) == j-k && sameLengths(elems[k:j], layout)
		}) && !counted(elems[k:j]) && (!fields || len(keys) == len(elems) && cardKeys(keys[k:j])) {
			groups = append(groups, [2]int{k, j})
		}
		k = j
	}
	if len(groups) == 0 {
		return reads
	}
	text, starts := joinApart(len(groups), func(b *strings.Builder, i int) {
		for k := groups[i][0]; k < groups[i][1]; k++ {
			if k > groups[i][0] {
				b.WriteByte(' ')
			}
			b.WriteString(elems[k])
		}
	})
	for _, it := range find(text) {
		i := sort.Search(len(starts), func(i int) bool { return starts[i] > it.From }) - 1
		if i < 0 || it.From != starts[i] || it.Start != it.From {
			continue
		}
		g := groups[i]
		n := g[1] - g[0] - 1
		for k := g[0]; k < g[1]; k++ {
			n += len(elems[k])
		}
		if it.To != starts[i]+n || it.End != it.To {
			continue
		}
		var spans []piece
		for k := g[0]; k < g[1]; k++ {
			spans = append(spans, piece{k, 0, len(elems[k])})
		}
		if slices.ContainsFunc(reads, func(r elementRead) bool { return overlaps(spans, r.match) }) {
			continue
		}
		it.From, it.To, it.Start, it.End = 0, n, 0, n // offsets of the run read joined by spaces
		reads = append(reads, elementRead{ElementItem{it, -1}, spans, spans})
	}
	return reads
}

// labelBreaks returns, for each element k, whether it is read after a line break in the
// reading of elems run together but after labels: after an element label takes for one (isWord:
// "card", "Id", ASCII letters, lower case after the first; isName, also a snake_case
// name: "user_id"), so that a label does not glue itself to the start of a value cut over the
// elements after it ("id", "sk-proj-Ab", "CdEf...", "..."; "card", "4111 11", "11 1111",
// " 1111"). Nil when that reading is one of
// the others (every element, or none, after a break).
func labelBreaks(elems []string, label func(string) bool) []bool {
	// The reading finds what the others do not only where a break is followed by an element
	// read run together with the next (a value cut over two elements after a label or more),
	// neither of them a word (a value is none: a list of tags, "priority", "eu-west", "gift",
	// is not read so).
	needed := false
	for k := 1; k+1 < len(elems) && !needed; k++ {
		next := elems[k+1]
		needed = label(elems[k-1]) && !label(elems[k]) && next != "" && next[0] != '\n' && !label(next)
	}
	if !needed {
		return nil
	}
	out := make([]bool, len(elems))
	for k := 1; k < len(elems); k++ {
		out[k] = label(elems[k-1])
	}
	return out
}

// isWord reports whether e is a word of ASCII letters, lower case after the first.
func isWord(e string) bool {
	for i := 0; i < len(e); i++ {
		if c := e[i]; !(c >= 'a' && c <= 'z') && !(i == 0 && c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return e != ""
}

// isName reports whether e is words (isWord) joined by underscores, a snake_case label
// ("user_id", "api_key"), or a word.
func isName(e string) bool {
	for w := range strings.SplitSeq(e, "_") {
		if !isWord(w) {
			return false
		}
	}
	return true
}

// counted reports whether groups are numbers of one length counting up by one step, not 0
// ("2200", "2201", "2202", "2203": line ids; "4000", "5000", "6000", "7000"): a sequence, not
// the groups of a card, though one in eleven such reads as a card joined by spaces.
func counted(groups []string) bool {
	step := 0
	for i := 1; i < len(groups); i++ {
		if len(groups[i]) != len(groups[0]) {
			return false
		}
		a, _ := strconv.Atoi(groups[i-1])
		b, _ := strconv.Atoi(groups[i])
		if b-a <= 0 || (i > 1 && b-a != step) {
			return false
		}
		step = b - a
	}
	return len(groups) > 1
}

// sameLengths reports whether the elements have the lengths of layout, one for one.
func sameLengths(elems []string, layout []int) bool {
	for i, e := range elems {
		if len(e) != layout[i] {
			return false
		}
	}
	return true
}

// allDigits reports whether e is ASCII digits, one or more.
func allDigits(e string) bool {
	return e != "" && strings.IndexFunc(e, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// acrossCuts returns pieces with the items that run across two pieces or more found by the
// cut readings of the pieces (scanned.CutSpans: those run together apart from the pieces
// around them, which, run together, glue themselves to an item's ends: "order 12", "4111
// 1111 ", "1111 1111", "7 done") masked, and those items (their offsets are those of the
// pieces run together).
func acrossCuts(pieces []string, find Find) ([]string, []Item) {
	s := strings.Join(pieces, "")
	var items []Item
	type span struct{ from, to, start, end int }
	seen := map[span]bool{}
	_ = scanned.CutSpans(pieces, func(from, to int) error {
		for _, it := range find(s[from:to]) {
			it.From, it.To, it.Start, it.End = it.From+from, it.To+from, it.Start+from, it.End+from
			if k := (span{it.From, it.To, it.Start, it.End}); !seen[k] {
				seen[k] = true
				items = append(items, it)
			}
		}
		return nil
	})
	if len(items) == 0 {
		return pieces, nil
	}
	return maskItems(pieces, "", items, false, find)
}

// maskJoined finds the items of pieces joined by sep that run across two pieces or more (with
// within, every item), and returns the pieces with them masked, and the items.
func maskJoined(pieces []string, sep string, find Find, within bool) ([]string, []Item) {
	return maskItems(pieces, sep, find(strings.Join(pieces, sep)), within, find)
}

// maskItems is maskJoined for the items found in pieces joined by sep. Without within, an
// item inside one piece is left to the piece itself where find finds it in the piece read
// alone; one only the pieces read together make (its piece alone reads otherwise:
// "4111\t1111\t1111\t1111" is a table's row, after "card on file:" a card) is masked here.
func maskItems(pieces []string, sep string, items []Item, within bool, find Find) ([]string, []Item) {
	starts := make([]int, len(pieces))
	o := 0
	for k, p := range pieces {
		if k > 0 {
			o += len(sep)
		}
		starts[k] = o
		o += len(p)
	}
	edits := make([][]edit, len(pieces))
	var found []Item
	alone := make(map[int][]Item)
	// foundAlone reports whether the masked part of it, inside piece k, is inside an item
	// find finds in the piece alone.
	foundAlone := func(k int, it Item) bool {
		own, ok := alone[k]
		if !ok {
			own = find(pieces[k])
			alone[k] = own
		}
		for _, o := range own {
			if o.Start <= it.Start-starts[k] && it.End-starts[k] <= o.End {
				return true
			}
		}
		return false
	}
	var text string
	for _, it := range items {
		if it.Inside {
			// an encoded run that took in the pieces around it (trimEncoded)
			if masked := pieceSpans(pieces, starts, it.Start, it.End); len(masked) > 1 {
				if text == "" {
					text = strings.Join(pieces, sep)
				}
				it, _, _ = trimEncoded(it, text, starts, pieceSpans(pieces, starts, it.From, it.To), masked, find)
			}
		}
		// An item within one piece is masked with the piece itself.
		first := -1
		for k, p := range pieces {
			if max(it.From, starts[k]) < min(it.To, starts[k]+len(p)) {
				first = k
				break
			}
		}
		if first < 0 || (!within && it.To <= starts[first]+len(pieces[first]) && foundAlone(first, it)) {
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
		es = mergeEdits(es)
		for j := len(es) - 1; j >= 0; j-- {
			out[k] = out[k][:es[j].start] + es[j].with + out[k][es[j].end:]
		}
	}
	return out, found
}
