package scanned

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime"
)

// The bounds of a Record. A digest kept costs about DigestBytes of memory
// (measured: TestRecordMemoryIsBounded), so a run keeps at most about
// 1.25 MiB and a Record (one per layer) about 20 MiB. Past a bound a text is simply
// scanned again at the next call, which is safe: a record only saves work.
const (
	// MaxPerRun bounds the digests kept for one run; past it, the run's
	// further texts are scanned again rather than recorded.
	MaxPerRun = 1 << 14
	// MaxTotal bounds the digests a Record keeps over all its runs; past
	// it, the records of the runs recorded first are dropped, oldest
	// first.
	MaxTotal = 1 << 18
	// DigestBytes is about what a digest kept costs.
	DigestBytes = 80
)

// Digest identifies a text.
type Digest [sha256.Size]byte

// Of returns the digest of text.
func Of(text string) Digest { return sha256.Sum256([]byte(text)) }

// Record holds, per run id, the digests of the texts a layer need not scan
// again, within MaxPerRun digests a run and MaxTotal in all. The zero
// Record is ready to use; it is safe for concurrent use.
type Record struct {
	mu   sync.Mutex
	runs map[string]*runDigests
	// order lists the runs in the order their records began; an entry
	// whose run has ended or begun again since (seq) is skipped.
	order []runEntry
	total int
	seq   uint64
}

type runDigests struct {
	set map[Digest]struct{}
	seq uint64
}

type runEntry struct {
	run string
	seq uint64
}

// Has reports whether text was recorded for run.
func (r *Record) Has(run, text string) bool {
	if run == "" {
		return false
	}
	return r.HasDigest(run, Of(text))
}

// HasDigest reports whether a text was recorded for run, by its digest.
func (r *Record) HasDigest(run string, d Digest) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rd := r.runs[run]
	if rd == nil {
		return false
	}
	_, ok := rd.set[d]
	return ok
}

// Add records text for run.
func (r *Record) Add(run, text string) { r.AddDigest(run, Of(text)) }

// AddOutput records the model's output of digest d (Output.Digest) for
// run: Scan passes it again as the text of an assistant message, the turn
// the caller appends with the model's answer, and as no other text. A
// layer that let the output through unchecked would otherwise pass it as
// checked wherever it comes back, as a user's message among them (the
// model made to write, decoded, a text the layer would refuse).
func (r *Record) AddOutput(run string, d Digest) { r.AddDigest(run, outputKey(d)) }

// outputKey is the digest under which AddOutput records an output's.
func outputKey(d Digest) Digest {
	return sha256.Sum256(append([]byte("output\x00"), d[:]...))
}

// AddDigest records a text by its digest for run.
func (r *Record) AddDigest(run string, d Digest) {
	if run == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]*runDigests{}
	}
	rd := r.runs[run]
	if rd == nil {
		r.seq++
		rd = &runDigests{set: map[Digest]struct{}{}, seq: r.seq}
		r.runs[run] = rd
		r.order = append(r.order, runEntry{run, rd.seq})
	}
	if _, ok := rd.set[d]; ok || len(rd.set) >= MaxPerRun {
		return
	}
	rd.set[d] = struct{}{}
	r.total++
	for r.total > MaxTotal && r.dropOldest(run) {
	}
}

// dropOldest forgets the records of the run recorded first, the run keep
// (being recorded) last, and reports whether it dropped any. r.mu is held.
func (r *Record) dropOldest(keep string) bool {
	for i := 0; i < len(r.order); i++ {
		e := r.order[i]
		rd := r.runs[e.run]
		if rd == nil || rd.seq != e.seq {
			r.order = slices.Delete(r.order, i, i+1)
			i--
			continue
		}
		if e.run == keep && r.total > len(rd.set) {
			continue
		}
		r.total -= len(rd.set)
		delete(r.runs, e.run)
		r.order = slices.Delete(r.order, i, i+1)
		return true
	}
	return false
}

// EndRun forgets run (runtime.RunEnder).
func (r *Record) EndRun(run string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd := r.runs[run]; rd != nil {
		r.total -= len(rd.set)
		delete(r.runs, run)
	}
	// Entries of ended runs are skipped; compact them once they are most.
	if len(r.order) > 2*len(r.runs)+64 {
		r.order = slices.DeleteFunc(r.order, func(e runEntry) bool {
			rd := r.runs[e.run]
			return rd == nil || rd.seq != e.seq
		})
	}
}

// Unrecorded is returned by a Scan check that lets a text through without
// having decided it (a classifier that failed, under on_error "open"): the
// text passes but is not recorded, so it is scanned again at the next call.
var Unrecorded = errors.New("passed without a verdict")

// Scan calls check with every text of c's transcript (see Each) that is not
// recorded for the call's run, then, when tools is true, with the definition
// of each tool the call offers (see EachTool), and records each text check
// passes (returns nil for; Unrecorded passes it without recording it). The
// first other error check returns is returned. A call without a run id
// records nothing and scans everything.
func (r *Record) Scan(c *runtime.ChatCall, system, tools bool, check func(i int, kind, text string) error) error {
	visit := r.visitor(c, check)
	if err := Each(c.Request.Messages, system, visit); err != nil {
		return err
	}
	if !tools {
		return nil
	}
	if err := EachTool(c.Request.Tools, visit); err != nil {
		return err
	}
	if t := ResponseFormatText(c.Request.ResponseFormat); t != "" {
		return visit(0, KindResponseFormat, t)
	}
	return nil
}

// ScanTurns calls check with the text of each turn of c's transcript
// (Turns: a tool result with the user's text next to it among them) that is not recorded for the call's run, and records each text
// check passes, as Scan does. A turn's text is recorded as itself, so one
// whose messages were each found clean is read all the same, and one a
// message joins (the next call of an agent loop adds a user message after
// the last) is a new text, read again.
//
// With system true, the system messages that are not all side by side are
// read together too, as one text (kind KindSystem, i the first of them),
// joined by line breaks and run together: Anthropic's API sends every
// system message, wherever it sits, as a block of the one system prompt
// (an OpenAI model reads each where it is; reading them together as well
// reads more, never less).
//
// Then the cut readings (CutReadings) of the pieces of each turn (a single
// message's too) and of the system prompt go to check, with kind KindCut
// (KindSystemCut) and i the first message: those are not recorded each, nor looked up (a
// text recorded clean read as a document is no message); once all of a
// turn's pass, the turn's pieces are recorded as such, so that the same
// turn, cut at the same places, is not read so again.
func (r *Record) ScanTurns(c *runtime.ChatCall, system bool, check func(i int, kind, text string) error) error {
	msgs := c.Request.Messages
	visit := r.visitor(c, check)
	if err := Turns(msgs, system, visit); err != nil {
		return err
	}
	var sys []int
	if system {
		for i := range msgs {
			if msgs[i].Role == "system" && !IsGrounding(&msgs[i]) {
				sys = append(sys, i)
			}
		}
		if len(sys) < 2 || TurnEnd(msgs, sys[0]) == sys[len(sys)-1]+1 {
			sys = nil // none, or one turn Turns read
		}
	}
	var sysPieces []string
	for _, i := range sys {
		sysPieces = appendPieces(sysPieces, &msgs[i])
	}
	if len(sysPieces) >= 2 {
		for _, sep := range []string{"\n", ""} {
			if err := visit(sys[0], KindSystem, strings.Join(sysPieces, sep)); err != nil {
				return err
			}
		}
	}
	run := c.Meta.Run.ID
	cut := func(i int, kind string, pieces []string) error {
		if len(pieces) < 3 {
			return nil
		}
		h := sha256.New()
		// A text is UTF-8 (JSON decoding makes it so): a key starting
		// with a byte no UTF-8 text holds is the digest of no text.
		h.Write([]byte("\xffcut\x00"))
		for _, p := range pieces {
			h.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
		}
		var key Digest
		h.Sum(key[:0])
		if run != "" && r.HasDigest(run, key) {
			return nil
		}
		undecided := false
		if err := CutReadings(pieces, func(text string) error {
			err := check(i, kind, text)
			if errors.Is(err, Unrecorded) {
				undecided = true
				return nil
			}
			return err
		}); err != nil {
			return err
		}
		if !undecided {
			r.AddDigest(run, key)
		}
		return nil
	}
	for i := 0; i < len(msgs); {
		j := SentTurnEnd(msgs, i)
		from := i
		i = j
		msg := &msgs[from]
		if IsGrounding(msg) || msg.Role != "user" && msg.Role != "tool" && msg.Role != "assistant" && msg.Role != "system" || msg.Role == "system" && !system {
			continue
		}
		var pieces []string
		for k := from; k < j; k++ {
			pieces, _ = turnPieces(pieces, &msgs[k])
		}
		if err := cut(from, KindCut, pieces); err != nil {
			return err
		}
	}
	if len(sys) > 0 {
		return cut(sys[0], KindSystemCut, sysPieces)
	}
	return nil
}

// visitor returns the visit of Scan and ScanTurns: a text recorded for the
// call's run (an assistant message's: or as the model's output, AddOutput)
// is skipped, any other goes to check and is recorded when check passes it.
func (r *Record) visitor(c *runtime.ChatCall, check func(i int, kind, text string) error) func(i int, kind, text string) error {
	run := c.Meta.Run.ID
	msgs := c.Request.Messages
	return func(i int, kind, text string) error {
		d := Of(text)
		if run != "" && (r.HasDigest(run, d) ||
			kind == KindMessage && msgs[i].Role == "assistant" && r.HasDigest(run, outputKey(d))) {
			return nil
		}
		if err := check(i, kind, text); err != nil {
			if errors.Is(err, Unrecorded) {
				return nil
			}
			return err
		}
		r.AddDigest(run, d)
		return nil
	}
}

// ResponseFormatText is the text of a call's response format the model
// reads, as it reads a tool's parameters: the schema's name and the keys,
// strings and numbers of its JSON Schema (the descriptions of its
// properties among them), one a line; "" when there is none.
func ResponseFormatText(rf *runtime.ResponseFormat) string {
	if rf == nil || (rf.Name == "" && len(rf.Schema) == 0) {
		return ""
	}
	text := rf.Name
	if schema := ArgsText(runtime.ToolUse{Arguments: rf.Schema}); schema != "" {
		text += "\n" + schema
	}
	return text
}

// AttachmentText returns the text an image part carries in place of an
// image (runtime.ContentPart.Attachment): the decoded data of a data: URL
// (or of Data) whose media type is not an image's
// ("data:text/plain;base64,..."), when it is UTF-8 text. A model or an
// OpenAI-compatible server that accepts such a part reads it as text. An
// image's own pixels, an http(s) URL and data that is not text give "" (the
// pipeline refuses the last: runtime.ContentPart.Unread).
func AttachmentText(p runtime.ContentPart) string {
	text, _ := p.Attachment()
	return text
}

// EachTool calls visit with the text of each tool definition, which the
// model reads as it reads the transcript: its name, its description and
// the keys, strings and numbers of its parameters' schema (the descriptions
// of the parameters among them), and a custom tool's grammar, one a line;
// kind is KindToolDef and i the tool's index.
func EachTool(tools []runtime.ToolDef, visit func(i int, kind, text string) error) error {
	for i, td := range tools {
		text := td.Name + "\n" + td.Description
		if params := ArgsText(runtime.ToolUse{Arguments: td.Parameters}); params != "" {
			text += "\n" + params
		}
		if c := td.Custom; c != nil && c.Definition != "" {
			text += "\n" + c.Definition
		}
		if err := visit(i, KindToolDef, text); err != nil {
			return err
		}
	}
	return nil
}

// Text kinds passed to Each's visit.
const (
	KindMessage    = "message"
	KindToolResult = "tool result"
	KindToolCall   = "tool call arguments"
	KindToolDef    = "tool definition"
	// KindAttachment is the text an image part carries (AttachmentText).
	KindAttachment = "attachment"
	// KindResponseFormat is the text of the call's response format
	// (ResponseFormatText); i is 0.
	KindResponseFormat = "response format"
	// KindGrounding is the text of the grounding block the runtime
	// injected (a message whose Metadata marks it runtime.GroundingKey):
	// retrieved documents, read as a tool result is.
	KindGrounding = "grounding block"
	// KindSummary is the text of a summary a compaction wrote (a message
	// whose Metadata marks it runtime.SummaryKey beside
	// runtime.GroundingKey): read as a message, whatever the system
	// setting.
	KindSummary = "summary"
	// KindNames is the names a message carries (NamesText): its author's,
	// its tool calls' names and ids, the call ids its results answer.
	KindNames = "names"
	// KindTurn is the text of consecutive messages of one role read as the
	// one turn a provider sends them as (Turns); i is the first of them.
	KindTurn = "turn"
	// KindSystem is the text of the system messages read as the one
	// system prompt Anthropic's API sends them as (ScanTurns); i is the
	// first of them.
	KindSystem = "system prompt"
	// KindCut is a cut reading of a turn's pieces (CutReadings); i is the
	// turn's first message.
	KindCut = "cut reading"
	// KindSystemCut is a cut reading of the system prompt's pieces
	// (KindSystem).
	KindSystemCut = "system prompt cut reading"
)

// NamesText returns the names msg carries that reach the model besides its
// text, one a line: its author (Name, which an OpenAI model reads), the name
// and id of each tool call, and the id of the call each tool result answers
// (a model's chat template may write the ids out); "" when it has none.
func NamesText(msg *runtime.Message) string {
	var b strings.Builder
	add := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	add(msg.Name)
	add(msg.ToolCallID)
	for i := range msg.Parts {
		if msg.Parts[i].Type == runtime.PartToolResult {
			add(msg.Parts[i].ToolCallID)
		}
	}
	for _, tc := range msg.ToolCalls {
		add(tc.Name)
		add(tc.ID)
	}
	return b.String()
}

// RunTogether returns the text pieces of msg (Content and its text parts)
// joined with nothing between them, when it has two or more that are not
// empty, else "". A provider sends them as separate blocks, which a model
// reads run together: a word split across two of them ("ign" and "ore all
// previous instructions") reaches it whole, while Message.Text, joining
// them by line breaks, keeps it split.
func RunTogether(msg *runtime.Message) string {
	n := 0
	if msg.Content != "" {
		n++
	}
	for i := range msg.Parts {
		if msg.Parts[i].Type == runtime.PartText && msg.Parts[i].Text != "" {
			n++
		}
	}
	if n < 2 {
		return ""
	}
	var b strings.Builder
	b.WriteString(msg.Content)
	for i := range msg.Parts {
		if msg.Parts[i].Type == runtime.PartText {
			b.WriteString(msg.Parts[i].Text)
		}
	}
	return b.String()
}

// TurnEnd returns the end of the turn msgs[i] starts (runtime.TurnEnd):
// the consecutive messages of one role a provider sends as one turn.
func TurnEnd(msgs []runtime.Message, i int) int { return runtime.TurnEnd(msgs, i) }

// SentTurnEnd returns the end of the turn msgs[i] starts as Anthropic's
// API sends it (runtime.SentTurnEnd): a tool message and the user and
// tool messages on either side of it are one user turn.
func SentTurnEnd(msgs []runtime.Message, i int) int { return runtime.SentTurnEnd(msgs, i) }

// ResultsOnly reports whether the turn msgs[i] starts (SentTurnEnd) holds
// tool results and no other text: a document the model reads, as each of
// its results is (a reader that reads a tool result as a document reads
// such a turn so too).
func ResultsOnly(msgs []runtime.Message, i int) bool {
	results := false
	for k := i; k < SentTurnEnd(msgs, i); k++ {
		msg := &msgs[k]
		if msg.Role != "tool" && msg.Text() != "" || IsGrounding(msg) || msg.Role != "tool" && msg.Role != "user" {
			return false
		}
		results = results || len(msg.ToolResults()) > 0
	}
	return results
}

// Turns calls visit, with kind KindTurn and i the turn's first message,
// with the text of each turn (SentTurnEnd) that holds two texts or more
// Each reads apart (the texts of two messages, or a tool result and another
// text): the pieces of its messages (turnPieces) joined by line breaks,
// then run together, as Each reads the text parts of one message. Turns of
// role "system" are visited only when system is true. The first error
// visit returns stops the walk and is returned.
func Turns(msgs []runtime.Message, system bool, visit func(i int, kind, text string) error) error {
	for i := 0; i < len(msgs); {
		j := SentTurnEnd(msgs, i)
		from := i
		i = j
		if msgs[from].Role == "system" && !system {
			continue
		}
		var pieces []string
		texts := 0
		for k := from; k < j; k++ {
			var results int
			pieces, results = turnPieces(pieces, &msgs[k])
			texts += results
			if msgs[k].Role != "tool" && msgs[k].Text() != "" {
				texts++
			}
		}
		if texts < 2 {
			continue
		}
		if err := visit(from, KindTurn, strings.Join(pieces, "\n")); err != nil {
			return err
		}
		if err := visit(from, KindTurn, strings.Join(pieces, "")); err != nil {
			return err
		}
	}
	return nil
}

// turnPieces appends the pieces of msg a turn is read from: the tool
// results it carries that are not empty, first, as Anthropic's API sends
// a user message's tool_result blocks before its text, then, but for a
// tool message (whose text is its result), its texts (appendPieces). It
// returns the pieces and the count of tool results among them.
func turnPieces(pieces []string, msg *runtime.Message) ([]string, int) {
	n := 0
	for _, t := range msg.ToolResults() {
		if t != "" {
			pieces = append(pieces, t)
			n++
		}
	}
	if msg.Role == "tool" {
		return pieces, n
	}
	return appendPieces(pieces, msg), n
}

// appendPieces appends the texts of msg that are not empty: Content and
// its text parts, in order.
func appendPieces(pieces []string, msg *runtime.Message) []string {
	if msg.Content != "" {
		pieces = append(pieces, msg.Content)
	}
	for i := range msg.Parts {
		if msg.Parts[i].Type == runtime.PartText && msg.Parts[i].Text != "" {
			pieces = append(pieces, msg.Parts[i].Text)
		}
	}
	return pieces
}

// IsGrounding reports whether msg is the grounding block the runtime
// injected.
func IsGrounding(msg *runtime.Message) bool {
	return msg.Metadata[runtime.GroundingKey] == "true"
}

// IsSummary reports whether msg is a summary a compaction wrote.
func IsSummary(msg *runtime.Message) bool {
	return msg.Metadata[runtime.SummaryKey] == "true"
}

// Each calls visit with every text of msgs the model reads, in order: each
// message's text (Content and text parts, joined by line breaks, then, when
// there are several, run together: RunTogether), the text its image parts
// carry in place of an image (AttachmentText), the tool results it carries
// (a tool message's text is its result), an assistant message's tool call
// arguments (ArgsText), and the names it carries (NamesText, kind
// KindNames). Messages of role "system" are visited only when system is
// true, except the grounding block (IsGrounding), which is always visited,
// with kind KindGrounding, or KindSummary when it is a summary a compaction
// wrote (IsSummary). Empty texts are skipped. The first error visit
// returns stops the walk and is returned.
func Each(msgs []runtime.Message, system bool, visit func(i int, kind, text string) error) error {
	for i := range msgs {
		msg := &msgs[i]
		if IsGrounding(msg) {
			kind := KindGrounding
			if IsSummary(msg) {
				kind = KindSummary
			}
			if t := msg.Text(); t != "" {
				if err := visit(i, kind, t); err != nil {
					return err
				}
			}
			continue
		}
		if msg.Role == "system" && !system {
			continue
		}
		if msg.Role != "tool" {
			if t := msg.Text(); t != "" {
				if err := visit(i, KindMessage, t); err != nil {
					return err
				}
			}
			if t := RunTogether(msg); t != "" {
				if err := visit(i, KindMessage, t); err != nil {
					return err
				}
			}
		}
		for j := range msg.Parts {
			if t := AttachmentText(msg.Parts[j]); t != "" {
				if err := visit(i, KindAttachment, t); err != nil {
					return err
				}
			}
		}
		for _, t := range msg.ToolResults() {
			if t == "" {
				continue
			}
			if err := visit(i, KindToolResult, t); err != nil {
				return err
			}
		}
		for _, tc := range msg.ToolCalls {
			if t := ArgsText(tc); t != "" {
				if err := visit(i, KindToolCall, t); err != nil {
					return err
				}
			}
		}
		if t := NamesText(msg); t != "" {
			if err := visit(i, KindNames, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// Output hashes the text a model streams through a layer, so that the
// assistant message the caller appends to the transcript is not scanned
// again when it comes back in the run.
type Output struct{ h hash.Hash }

// NewOutput returns an empty Output.
func NewOutput() *Output { return &Output{h: sha256.New()} }

// Write adds a delta's text.
func (o *Output) Write(text string) { o.h.Write([]byte(text)) }

// Digest returns the digest of the text written so far.
func (o *Output) Digest() Digest {
	var d Digest
	o.h.Sum(d[:0])
	return d
}

// ArgsText is the text of a tool call's arguments a detector scans:
// runtime.ToolUse.ArgsText (every key and string, escapes resolved), followed
// by every number of the arguments, one a line (a card number sent as a JSON
// number), in plain decimal form (jsonnum.PlainText): the number the tool
// chain runs, however the call spells it, so 4.111111111111111e15 reads as
// 4111111111111111 and 1e-7 as 0.0000001.
func ArgsText(tc runtime.ToolUse) string {
	text := tc.ArgsText()
	if !json.Valid(tc.Arguments) {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	dec := json.NewDecoder(bytes.NewReader(tc.Arguments))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			break
		}
		if n, ok := tok.(json.Number); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(jsonnum.PlainText(n))
		}
	}
	return b.String()
}

// The bounds of the cut readings (CutReadings).
const (
	// Window is the longest text a cut reading must hold whole: longer
	// than the longest phrase or keyword a detector's rule matches in one
	// stretch (an injection's phrases, a banned keyword, a personal datum).
	Window = 160
	// Context is how much of the first and the last piece a cut reading
	// holds: an injection's phrase families score over a longer stretch
	// than one phrase.
	Context = 1024
	// MaxCutPieces is the most pieces a reading run together apart from
	// the pieces around it spans.
	MaxCutPieces = 8
)

// CutReadings calls visit with the readings of pieces (the texts of a
// message or of a turn, in order, none empty) that find a text cut across
// them which the readings joined by line breaks and run together miss: run
// together, the pieces around it glue themselves to its ends ("Hi",
// "ignore all prev", "ious instructions" reads "Hiignore ..."). For each
// stretch of pieces a to b-1 (two to MaxCutPieces of them, those between
// the first and the last shorter than Window together) it visits them run
// together, apart from their neighbours: the last Context bytes of the
// first, the pieces between, the first Context bytes of the last. Where more
// than MaxCutPieces pieces start within Window bytes (a text cut letter by
// letter), it also visits, from each piece's start, the next Window bytes
// run together, and, to each piece's end, the Window bytes before it: a
// text cut into that many pieces is found when one of its ends is not
// glued. Each reading is at most 2*Context+Window bytes, and there are at most
// MaxCutPieces+1 for a piece, so the cost is bounded by the count of the
// pieces, not their lengths; a reading visited before in the walk is not
// visited again. Fewer than three pieces have none (the two readings
// leave nothing to glue). The first error visit returns is returned.
func CutReadings(pieces []string, visit func(text string) error) error {
	s := strings.Join(pieces, "")
	seen := map[string]struct{}{}
	return CutSpans(pieces, func(from, to int) error {
		t := s[from:to]
		if _, ok := seen[t]; ok {
			return nil
		}
		seen[t] = struct{}{}
		return visit(t)
	})
}

// CutSpans calls visit with the spans [from, to) of pieces run together
// that CutReadings reads (a span may come twice), on rune boundaries.
func CutSpans(pieces []string, visit func(from, to int) error) error {
	n := len(pieces)
	if n < 3 {
		return nil
	}
	starts := make([]int, n+1)
	for k, p := range pieces {
		starts[k+1] = starts[k] + len(p)
	}
	// runeAt reports whether offset o of the pieces run together starts a
	// rune (or ends the text).
	runeAt := func(o int) bool {
		if o >= starts[n] {
			return true
		}
		k := sort.Search(n, func(k int) bool { return starts[k+1] > o })
		return utf8.RuneStart(pieces[k][o-starts[k]])
	}
	emit := func(from, to int) error {
		for from < to && !runeAt(from) {
			from++
		}
		for to > from && !runeAt(to) {
			to--
		}
		if from == to {
			return nil
		}
		return visit(from, to)
	}
	for a := 0; a < n; a++ {
		for e := a + 2; e <= n && e-a <= MaxCutPieces; e++ {
			if a == 0 && e == n {
				break // the whole run together, read already
			}
			if starts[e-1]-starts[a+1] >= Window {
				break
			}
			if err := emit(max(starts[a], starts[a+1]-Context), min(starts[e], starts[e-1]+Context)); err != nil {
				return err
			}
		}
		if a+MaxCutPieces < n && starts[a+MaxCutPieces]-starts[a] < Window {
			if err := emit(starts[a], min(starts[n], starts[a]+Window)); err != nil {
				return err
			}
		}
		if a >= MaxCutPieces && starts[a+1]-starts[a+1-MaxCutPieces] < Window {
			if err := emit(max(0, starts[a+1]-Window), starts[a+1]); err != nil {
				return err
			}
		}
	}
	return nil
}
