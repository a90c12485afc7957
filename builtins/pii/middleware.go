package pii

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/builtins/internal/linehold"
	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "pii"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitGuards, runtime.TraitRewritesMessages},
		Doc:     "finds email, phone, SSN, card numbers, IBANs and IPs in every message the model reads, in its output, in tool arguments and in tool results; blocks or redacts",
		New: func() runtime.Middleware {
			return &Middleware{Action: ActionBlock, OnError: "closed", System: true, Output: true}
		},
	})
}

// The actions of the pii layer.
const (
	ActionBlock  = "block"
	ActionRedact = "redact"
)

// Middleware is the pii layer; its exported fields are its config
// (schemas/pii.cue).
type Middleware struct {
	// Action is "block" (the default) or "redact".
	Action string `json:"action"`
	// Kinds selects what to detect: "email", "phone", "ssn", "card",
	// "iban", "ip" (IPv4 and IPv6); empty means all.
	Kinds []string `json:"kinds,omitempty"`
	// Regions are the regions whose national phone formats are recognised; empty means
	// DefaultRegions.
	Regions []string `json:"regions,omitempty"`
	// OnError is accepted for the schema; the scanner has no failure mode.
	OnError string `json:"on_error"`
	// System scans (or redacts) the messages of role "system" too (the
	// default); false leaves them, the operator's own instructions, as
	// they are.
	System bool `json:"system"`
	// Output scans the model's streamed text too (the default): with
	// "block" a line holding personal data ends the stream before it is
	// released, with "redact" it is released redacted.
	Output bool `json:"output"`
	// Grounding decides what a grounding item holding personal data does
	// (runtime.GroundingScreener): runtime.GroundingBlock blocks the
	// call, naming the item; runtime.GroundingDrop leaves the item out of
	// the block. Unset, the action applies: "block" blocks, "redact"
	// redacts the item in the block.
	Grounding string `json:"grounding,omitempty"`

	name    string
	seen    scanned.Record
	scanner *Scanner
}

// Provision builds the scanner once.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	var kinds []Kind
	for _, k := range m.Kinds {
		if k == "ip" {
			kinds = append(kinds, KindIPv4, KindIPv6)
			continue
		}
		kinds = append(kinds, Kind(k))
	}
	s, err := New(Config{Kinds: kinds, Regions: m.Regions})
	if err != nil {
		return err
	}
	m.scanner = s
	return nil
}

// Validate checks action, on_error and regions.
func (m *Middleware) Validate() error {
	if err := CheckRegions(m.Regions); err != nil {
		return err
	}
	if m.Action != ActionBlock && m.Action != ActionRedact {
		return fmt.Errorf(`action must be "block" or "redact", got %q`, m.Action)
	}
	if m.OnError != "closed" && m.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, m.OnError)
	}
	return runtime.CheckGroundingSetting(m.Grounding)
}

// ScreenGrounding implements runtime.GroundingScreener. With action
// "redact" and grounding unset it flags nothing: the item's personal data
// is redacted in the block.
func (m *Middleware) ScreenGrounding(_ context.Context, text string) (string, bool) {
	if m.Grounding == "" && m.Action == ActionRedact {
		return "", false
	}
	ms := m.scanner.Find(text)
	if len(ms) == 0 {
		return "", false
	}
	return "personal data (" + kindsOf(ms) + ")", m.Grounding == runtime.GroundingDrop
}

// kindsOf names the distinct kinds of ms in detection-priority order.
func kindsOf(ms []Match) string {
	var ks []string
	for _, k := range kindOrder {
		for _, m := range ms {
			if m.Kind == k {
				ks = append(ks, string(k))
				break
			}
		}
	}
	return strings.Join(ks, ", ")
}

// WrapChat implements runtime.ChatWrapper. Every text of the transcript the
// model will read is scanned: the text of every message (user, assistant,
// and system unless System is false; content and text parts; the grounding
// block the runtime injected whatever System says), every tool
// result (tool messages and tool_result parts), the arguments of the tool
// calls assistant messages carry (their strings and keys) and, unless System
// is false (they are the operator's text too), the tool definitions and the
// response format's schema the call carries. Personal data
// placed in an earlier user turn, a fabricated assistant turn or a tool
// result of the history a gateway client sends is found as in the latest
// message. With action "block" a match blocks the call; the message names
// the message's index and the kinds found, never the data. Each text found
// clean is recorded for the run (scanned.Record), as is the model's own text
// that passed through the layer, so an agent loop's history is not scanned
// again at every step; a text the caller changed or added always is. With
// "redact" every match is rewritten on the call's own copy of the transcript
// before the inner layers run (tool call arguments stay valid JSON; object
// keys are renamed to their placeholder; the tool definitions and the
// response format are masked as mask.Transcript.Tools and Format mask them,
// their schemas still valid JSON). The caller's transcript still
// holds the raw text and resends it with the next call, so earlier messages
// are redacted again; the caller's messages are never modified. A thinking
// block sent back is signed and cannot be masked: with "block" one holding
// personal data blocks the call; with "redact" it is left out of the call's
// copy, or the call fails when the turn going on cannot do without it
// (mask.Transcript.Thinking), as redact does with a secret. The fields no
// model reads but its provider receives (mask.Fields: the end user's id, the
// safety identifier, the stop sequences, the prompt cache key, the metadata)
// are read whatever System says, the caller's own: with "block" any of them
// holding personal data blocks the call; with "redact" the prompt cache key
// and the metadata's values are masked, and the others, which masking would
// change the meaning of, block it (mask.Transcript.RefuseFields). So does,
// with either action, the URL of an image or a document the provider
// fetches that holds personal data (mask.Transcript.RefuseURLs): masked, it
// would locate another resource.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	if m.Action == ActionBlock {
		return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
			// A value cut across two pieces of one message, or across
			// the messages of one turn (consecutive messages of one role,
			// a tool result and the user's text after it), which the
			// model reads run together, is in no text Scan reads whole.
			tr := mask.Transcript{Mask: m.scanner.Redact, System: m.System}
			if _, split := tr.AcrossParts(c.Request.Messages, m.scanner.items, true); split {
				return &runtime.BlockedError{Layer: m.name,
					Message: "personal data cut across the parts of a message, or across the messages of one turn (consecutive messages of one role, a tool result and the user's text after it), which the model reads run together"}
			}
			if mask.HasFields(&c.Request) {
				fields := mask.Transcript{Mask: m.scanner.Redact, Find: m.scanner.items, Seen: &m.seen}
				if err := fields.BlockFields(c.Meta.Run.ID, &c.Request, m.name, "personal data"); err != nil {
					return err
				}
			}
			urls := mask.Transcript{Mask: m.scanner.Redact, Find: m.scanner.items, System: m.System, Seen: &m.seen}
			if err := urls.RefuseURLs(c.Meta.Run.ID, c.Request.Messages, m.name, "personal data", true); err != nil {
				return err
			}
			if err := m.blockThinking(c); err != nil {
				return err
			}
			if err := m.blockArgsAcross(c.Request.Messages); err != nil {
				return err
			}
			if err := m.seen.Scan(c, m.System, m.System, func(i int, kind, text string) error {
				ms := m.scanner.Find(text)
				found := ""
				if len(ms) > 0 {
					found = kindsOf(ms)
				} else if it, split := mask.SplitInJSON(text, m.scanner.items); split {
					// a JSON document whose array holds a value cut across its strings
					found = it.Label + ", cut across the strings of an array"
				} else {
					return nil
				}
				where := fmt.Sprintf("message %d", i)
				switch kind {
				case scanned.KindToolDef:
					where = "the definition of tool " + c.Request.Tools[i].Name
				case scanned.KindResponseFormat:
					where = "the response format"
				case scanned.KindToolCall, scanned.KindToolResult, scanned.KindAttachment, scanned.KindGrounding, scanned.KindSummary, scanned.KindNames:
					where += " " + kind
				}
				hint := ""
				if kind == scanned.KindToolDef || kind == scanned.KindResponseFormat ||
					(kind == scanned.KindMessage && c.Request.Messages[i].Role == "system") {
					if kind == scanned.KindMessage {
						where += " (system)"
					}
					hint = `; the operator's own text is scanned with system: true (the default): set system: false to leave it alone`
				}
				return &runtime.BlockedError{Layer: m.name,
					Message: fmt.Sprintf("%s contains personal data (%s)%s", where, found, hint)}
			}); err != nil {
				return err
			}
			run := c.Meta.Run.ID
			out := scanned.NewOutput()
			err := m.output(ctx, c, next, func(d runtime.Delta) bool {
				out.Write(d.Text)
				return yield(d)
			})
			if err == nil && !c.Stopped {
				m.seen.AddOutput(run, out.Digest())
			}
			return err
		}
	}
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		run := c.Meta.Run.ID
		tr := mask.Transcript{Mask: m.scanner.Redact, Find: m.scanner.items, System: m.System, Seen: &m.seen}
		joined, split := tr.AcrossParts(c.Request.Messages, m.scanner.items, true)
		msgs, masked := tr.Messages(run, joined)
		msgs, dropped, err := tr.Thinking(run, &c.Request, msgs, m.name, "personal data")
		if err != nil {
			return err
		}
		masked = masked || split || dropped
		if err := tr.RefuseFields(run, &c.Request, m.name, "personal data"); err != nil {
			return err
		}
		if err := tr.RefuseURLs(run, c.Request.Messages, m.name, "personal data", false); err != nil {
			return err
		}
		tools, format, defsMasked := c.Request.Tools, c.Request.ResponseFormat, false
		if m.System {
			tools, format, defsMasked = tr.Definitions(run, &c.Request)
		}
		key, metadata, fieldsMasked := tr.MaskFields(run, &c.Request)
		if !masked && !defsMasked && !fieldsMasked {
			return m.output(ctx, c, next, yield)
		}
		orig := c.Request
		c.Request.Messages, c.Request.Tools, c.Request.ResponseFormat = msgs, tools, format
		c.Request.PromptCacheKey, c.Request.Metadata = key, metadata
		defer func() {
			c.Request.Messages, c.Request.Tools, c.Request.ResponseFormat = orig.Messages, orig.Tools, orig.ResponseFormat
			c.Request.PromptCacheKey, c.Request.Metadata = orig.PromptCacheKey, orig.Metadata
		}()
		return m.output(ctx, c, next, yield)
	}
}

// blockThinking returns the refusal of action "block" for a thinking block
// sent back whose text holds personal data: it is signed and reaches the
// model as it is. A text found clean is recorded for the run.
func (m *Middleware) blockThinking(c *runtime.ChatCall) error {
	run := c.Meta.Run.ID
	for i := range c.Request.Messages {
		for _, p := range c.Request.Messages[i].Parts {
			if p.Type != runtime.PartThinking || p.Text == "" || (run != "" && m.seen.Has(run, p.Text)) {
				continue
			}
			if ms := m.scanner.Find(p.Text); len(ms) > 0 {
				return &runtime.BlockedError{Layer: m.name,
					Message: fmt.Sprintf("message %d thinking contains personal data (%s)", i, kindsOf(ms))}
			}
			m.seen.Add(run, p.Text)
		}
	}
	return nil
}

// blockArgsAcross refuses msgs when the arguments of a tool call of theirs hold personal data
// cut across their strings as written (mask.SplitInJSON), which the model reads, and which
// the reading of their keys and strings (scanned.ArgsText) does not hold: "redact" masks the
// arguments read so (mask.Args).
func (m *Middleware) blockArgsAcross(msgs []runtime.Message) error {
	for i := range msgs {
		if msgs[i].Role == "system" && !m.System {
			continue
		}
		for _, tc := range msgs[i].ToolCalls {
			if it, split := mask.SplitInJSON(string(tc.Arguments), m.scanner.items); split {
				return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf(
					"message %d tool call arguments contains personal data (%s, cut across their strings)", i, it.Label)}
			}
		}
	}
	return nil
}

// output runs next with the model's streamed text scanned (unless Output is
// off) through linehold.Stream. Text is released by whole lines, each
// scanned before it goes out, and the rest of a line is held until its line
// break, a tool call fragment or the end of the stream: an item is never
// split across releases. A line that ends in digit groups a card number
// or a phone number could run on from ("4111 1111" with "1111 1111" on the
// next line, "call (415)" with "555-2671") is held with the next lines (as
// far back as the last 18 digits; one ending in a colon, "Step 3:", is not,
// as nothing runs on from it), and so is a line
// in which an IBAN's groups begin that the next line may go on with, so
// that a card or an IBAN wrapped over lines is found as in a whole text. With "redact" a line is
// released redacted; with "block" a line holding personal data ends the call
// with a *runtime.BlockedError and is never released (the lines before it
// were clean and have gone out). Usage reported on held deltas rides on the
// next released one, and the finish reason on the last. When the stream
// fails, held text is dropped, never released unscanned. Thinking goes out a
// block at a time, whole, when it holds no personal data; a signed block
// cannot be masked, so one that does is left out, with either action, and
// tool calls after it fail the call (linehold.Stream).
func (m *Middleware) output(ctx context.Context, c *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool) error {
	if !m.Output {
		return next(ctx, c, yield)
	}
	calls := func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		return runtime.HoldToolCalls(ctx, c, next, yield, m.cleanCalls)
	}
	o := &outputHold{scanner: m.scanner}
	after := func(before, text string) (string, error) {
		if o.take(text) {
			return text, nil
		}
		masking := o.masking
		o.masking = false
		if o.dropped(text) {
			return "", nil
		}
		if o.inMasked && !masking {
			// the text held at the end of the stream, or when tool calls arrive, is released
			// without releasable: the rest of the masked run it starts with goes out as nothing
			// all the same
			o.inMasked = false
			text = text[o.restOf(text):]
		}
		return m.cleanAfter(before, text, o.phones())
	}
	return linehold.Stream(ctx, c, calls, yield, linehold.Filter{Releasable: o.releasable, Clean: m.cleanOutput,
		CleanAfter: after, Tail: o.tail,
		Layer: m.name, Finding: "personal data"})
}

// outputHold is the hold of one stream's output: it knows the end of the output released
// (outputTail), which the text held is read after, as CleanAfter reads it.
type outputHold struct {
	scanner *Scanner
	before  string
	// released is how many bytes of the output have been released: the offset in the
	// output of the text held.
	released int
	// across is what itemsAcross made of the last cut it was asked about, at offsets in
	// the output: the cut, the end of the text it read after it, and the cut it returned.
	across struct{ cut, end, got int }
	// scans counts the readings of the text held (itemsAcross, runPart).
	scans int
	// verbatim is the length of the part runPart let out as it is, until it goes out.
	verbatim int
	// inMasked: the text held starts with the rest of a run that runPart let out masked, one
	// placeholder standing for all of it; drop is the length of the part of it about to go
	// out as nothing.
	inMasked bool
	drop     int
	// width is the length of the masked run's last line that went out: its lines after are
	// as long, but its last.
	width int
	// runLine is the last line of the masked run that went out as nothing, which the run's
	// last line, or a word after the run, follows (runLines).
	runLine string
	// masking: the part about to go out is the one runPart let out masked, which the rest
	// of the run follows.
	masking bool
	// partFrom is the offset in the output that the end of the text held must pass before
	// runPart reads it again: when the run's first line is longer than all but runKept bytes
	// of it, none of it can go out as it is until the text passes that line by runKept bytes.
	partFrom int
	// memo is the verdicts on the phone candidates the readings of the stream met (a table's
	// rows hold the same ones), up to maxPhoneMemo of them.
	memo phoneMemo
}

// maxPhoneMemo bounds the phone candidates a stream's hold keeps the verdicts on.
const maxPhoneMemo = 4096

// phones returns the hold's memo of phone candidates, emptied when it holds maxPhoneMemo.
func (o *outputHold) phones() phoneMemo {
	if o.memo == nil || len(o.memo) >= maxPhoneMemo {
		o.memo = phoneMemo{}
	}
	return o.memo
}

// tail is outputTail, kept for the next releasable.
func (o *outputHold) tail(before, text string) string {
	o.before = outputTail(before, text)
	o.released += len(text)
	return o.before
}

// releasable returns how many bytes of the model's held output may be released: up to the
// last line break, but not past the start of a line from which an item may run on into the
// lines still to come (heldFrom): a card number's digit groups or an IBAN's groups wrapped
// over lines; nor past the start of a line ending in a run of base64 that the next line may
// go on with (linehold.Hold.Encoded), so that a value's encoding wrapped over lines is read
// whole; nor inside an item the detectors find in the text held, read after the output
// released (itemsAcross), which reads on past the cut the others make.
func (o *outputHold) releasable(buf string, h *linehold.Hold) int {
	cut := linehold.LastLine(buf)
	if cut == 0 {
		return 0
	}
	if o.inMasked {
		if end := o.maskedRest(buf, cut, h); end > 0 {
			return end
		}
	}
	end, run := cut, h.Encoded(buf, cut)
	if run == 0 {
		if cut > maxEncodedHold {
			return o.runPart(buf, cut)
		}
		return 0 // a run held from the start of the text: it is not folded again
	}
	cut = run
	if held := heldFrom(buf[:cut]); held < cut {
		cut = h.Encoded(buf, held)
	}
	got := o.itemsAcross(buf, cut)
	if got == 0 && run < end && end > maxEncodedHold {
		// the lines before a run that goes on are held with it ("Step 2" then a dump): they
		// are decided with it at the bound
		return o.runPart(buf, end)
	}
	return got
}

// maxEncodedHold bounds the run of base64 or hex (wrapped over lines, a hex dump's lines, bytes
// with separators) that the output is held with while the run goes on: past it, the run's
// first lines go out (runPart).
const maxEncodedHold = 64 << 10

// runKept is how much of a run runPart keeps held when its lines before go out: far more than
// the encoding of an item and the words before it, so that no item the text still to come
// completes starts in the lines that go out.
const runKept = 8 << 10

// runPart returns how much of buf, held from its start for a run wrapped over its lines up
// to cut (and for the lines before the run that it may go on from), more than maxEncodedHold
// bytes, may go out while the run goes on: when the text up
// to cut, read after the output released, holds no item, its lines up to the last
// runKept bytes, as they are (take: read within the longer text, which Redact
// leaves as it is, the part is not read again alone); else all of it up to cut, masked (or
// refused) as the text up to cut reads, and the run's lines after it are a run of their own.
func (o *outputHold) runPart(buf string, cut int) int {
	if o.released+cut <= o.partFrom {
		return 0
	}
	o.scans++
	ctx := contextOf(o.before)
	for _, m := range o.scanner.redactedSpans(ctx+buf[:cut], o.phones()) {
		if m.End > len(ctx) {
			o.inMasked, o.masking = true, true
			line := strings.TrimSuffix(buf[:cut], "\n")
			o.width = len(line) - strings.LastIndexByte(line, '\n') - 1
			return cut
		}
	}
	r := strings.LastIndexByte(buf[:cut-runKept], '\n') + 1
	if r == 0 {
		// a first line longer than all but runKept bytes: read again once the text passes it
		// by runKept bytes, not at each line
		o.partFrom = o.released + strings.IndexByte(buf, '\n') + runKept
	}
	o.verbatim = r
	return r
}

// maskedRest returns how much of buf, which starts with the rest of a run runPart let out
// masked, goes out as nothing: the placeholder that went out stands for the whole run, as in
// the whole text, and the run's lines after the cut, an item's encoding straddling it among
// them, are no run of their own, read apart. While the run goes on (linehold.Hold.Encoded)
// that is all of buf up to cut; once it ends, the rest of the run as restOf reads it.
func (o *outputHold) maskedRest(buf string, cut int, h *linehold.Hold) int {
	if h.Encoded(buf, cut) == 0 {
		o.drop = cut
		line := strings.TrimRight(buf[:cut], "\r\n")
		o.runLine = line[strings.LastIndexByte(line, '\n')+1:]
		return cut
	}
	o.inMasked = false
	o.drop = o.restOf(buf[:cut])
	return o.drop
}

// restOf returns the length of the rest of a run runPart let out masked that text starts
// with: the run as the encodings read it (textnorm.Encodings: it may take in a short line
// after it, unless that line reads as a word: Encoded.Cut) up to its line's end; or, when they find none starting text (a rest too short to
// be read as an encoding of its own: "MSAxMTEx", the end of "4111 1111"), its lines made of
// base64 or hex characters (runLines).
func (o *outputHold) restOf(text string) int {
	es := textnorm.Encodings(text)
	if len(es) == 0 || es[0].Start != 0 {
		return runLines(text, o.width, o.runLine)
	}
	end := es[0].End
	if es[0].Cut != 0 {
		end = es[0].Cut // a last line that reads as a word is text after the run
	}
	if k := strings.IndexByte(text[end:], '\n'); k >= 0 {
		return end + k + 1
	}
	return len(text)
}

// runLines returns the length of the lines text starts with that go on a run wrapped over
// lines: made of base64 (or base64url, or hex) characters, each width bytes long but the
// last, which may be shorter or end in padding (a shorter one that reads as a word of the text
// after the run, textnorm.WordAfterRun, read after the lines before it or prev, the run's line
// before text, is not the run's); it may lack its line break at the end of text.
func runLines(text string, width int, prev string) int {
	n := 0
	for n < len(text) {
		line := text[n:]
		k := strings.IndexByte(line, '\n')
		if k >= 0 {
			line = line[:k]
		}
		if line == "" || !isBase64Line(line) || len(line) > width {
			break
		}
		before := prev
		if n > 0 {
			before = strings.TrimSuffix(text[:n-1], "\r")
		}
		if len(line) < width && textnorm.WordAfterRun(before, line, text[n+len(line):]) {
			break // a word of the text after the run
		}
		n += len(line)
		if k >= 0 {
			n++
		}
		if len(line) < width || strings.HasSuffix(line, "=") {
			break // the run's last line
		}
	}
	return n
}

// isBase64Line reports whether line is made of base64 or base64url characters and padding
// (hex among them).
func isBase64Line(line string) bool {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !isAlnum(c) && c != '+' && c != '/' && c != '-' && c != '_' && c != '=' && c != '\r' {
			return false
		}
	}
	return true
}

// dropped reports whether text, a part of the output about to go out, is the one maskedRest
// let out as nothing.
func (o *outputHold) dropped(text string) bool {
	ok := o.drop > 0 && len(text) == o.drop
	o.drop = 0
	return ok
}

// take reports whether text, a part of the output about to go out, is the one runPart let
// out as it is.
func (o *outputHold) take(text string) bool {
	ok := o.verbatim > 0 && len(text) == o.verbatim
	o.verbatim = 0
	return ok
}

// itemsAcross is itemsAcross of buf read after the output released, not read again when its
// last reading of the same cut held all the text held now (it cut before an item across it,
// and the text before went out) and the text after the cut, up to maxHoldBack bytes of it,
// has grown since by ASCII letters and digits alone: the text stays held, the most a reading
// could do, until a new line break, a release or another character has it read again.
func (o *outputHold) itemsAcross(buf string, cut int) int {
	a := &o.across
	end := min(len(buf), cut+maxHoldBack)
	if o.released+cut == a.cut && a.got == o.released && a.end >= o.released && a.end-o.released <= end &&
		!hasSeparator(buf[a.end-o.released:end]) {
		return 0
	}
	o.scans++
	got := itemsAcross(o.scanner, o.phones(), o.before, buf, cut, max(0, cut-maxHoldBack))
	a.cut, a.end, a.got = o.released+cut, o.released+end, o.released+got
	return got
}

// hasSeparator reports whether text holds a byte other than an ASCII letter or digit.
func hasSeparator(text string) bool {
	for i := 0; i < len(text); i++ {
		if !isAlnum(text[i]) {
			return true
		}
	}
	return false
}

// maxHoldBack is how far before the cut the other rules make an item already written across
// it is looked for, and how much more its line holds back: an item whose line starts further
// back is cut from at its own start, mid-line.
const maxHoldBack = 1024

// itemsAcross returns cut, a line start of buf, or an earlier place to cut buf at so that no
// item the detectors find in the text held (read after before, the output released) runs
// across it: the start of the line in which the first item across the cut begins, and
// again while one runs across that, as far back as floor; past it, the start of the first
// item, mid-line. The hold releasable makes is decided by the end of the text
// held, what the text still to come may go on with ("4111 1111" ending a line); this is the
// rest of the rule, what the text already held goes on with: "+100000" then "00X0", a
// number and its extension on the next line, is one phone number, and the line of the first
// cannot go out alone once the second is held.
func itemsAcross(s *Scanner, memo phoneMemo, before, buf string, cut, floor int) int {
	if cut <= 0 || cut >= len(buf) || !mayRunAcross(buf, cut) {
		return cut
	}
	lo := max(floor, cut-maxHoldBack)
	for lo > 0 && lo < cut && !utf8.RuneStart(buf[lo]) {
		lo++
	}
	if lo >= cut {
		return cut // an item across it would start past floor
	}
	hi := min(len(buf), cut+maxHoldBack)
	for hi < len(buf) && !utf8.RuneStart(buf[hi]) {
		hi++
	}
	pre := ""
	if lo == 0 {
		pre = contextOf(before)
	}
	ms := s.redactedSpans(pre+buf[lo:hi], memo)
	at := func(i int) int { return max(0, i-len(pre)+lo) }
	first := -1 // the start of the item across the line rule's cut
	for {
		moved := false
		for _, m := range ms {
			// an item ending the line before the cut is read apart from the digits
			// after it too: a column of groups is a card only with a separator later
			if start, end := at(m.Start), at(m.End); start < cut && (end > cut ||
				end >= cut-2 && isDigit(buf[cut]) && strings.TrimSpace(buf[end:cut]) == "") {
				if first < 0 {
					first = start
				}
				cut = strings.LastIndexByte(buf[:start], '\n') + 1
				moved = true
				break
			}
		}
		if !moved && cut > lo {
			// the part before the cut, read alone as it goes out, finds at its end an item
			// the text after it unmakes ("+44 20 7946 0958" then "12 ok")
			if start := endsAlone(s, memo, pre, buf, lo, cut, ms, at); start >= 0 {
				if first < 0 {
					first = start
				}
				cut = strings.LastIndexByte(buf[:start], '\n') + 1
				moved = true
			}
		}
		if !moved || cut == 0 {
			break
		}
	}
	if first >= 0 && cut < lo {
		return first
	}
	return cut
}

// partWindow is how much of the end of the part before a cut endsAlone reads: more than the
// longest item the text after the cut may unmake, with the words before it.
const partWindow = 256

// endsAlone returns the start of an item that the part of buf before cut, read alone (after
// pre when the part starts at lo, 0), finds at its end and the reading of the text held, ms
// (offsets mapped by at), does not: the text after the cut unmakes it; or the start of an
// item of ms ending in that part that the part read alone does not find: the text after the
// cut makes it; or -1. Only the last
// partWindow bytes of the part before the blanks it ends in, from a line start, are read
// with those blanks; a part of blanks alone ends in no item.
func endsAlone(s *Scanner, memo phoneMemo, pre, buf string, lo, cut int, ms []Match, at func(int) int) int {
	tail := len(strings.TrimRight(buf[:cut], " \t\r\n"))
	if tail <= lo {
		return -1
	}
	from := max(lo, tail-partWindow)
	if from > lo {
		from = max(lo, strings.LastIndexByte(buf[:from], '\n')+1)
	}
	if from > lo || lo > 0 {
		pre = ""
	}
	if !mayEndItem(buf[from:tail]) {
		return -1
	}
	alone := s.redactedSpans(pre+buf[from:cut], memo)
	span := func(p Match) (int, int) { return max(0, p.Start-len(pre)) + from, max(0, p.End-len(pre)) + from }
	for _, p := range alone {
		start, end := span(p)
		if end < tail {
			continue
		}
		same := false
		for _, m := range ms {
			if at(m.Start) == start && at(m.End) == end {
				same = true
				break
			}
		}
		if !same {
			return start
		}
	}
	// an item of the text held that ends before the cut and that the part, read alone, does not
	// find: the text after the cut makes it ("34555-2671" then "1" and "111111]0")
	for _, m := range ms {
		start, end := at(m.Start), at(m.End)
		if start < from || end <= from || end > cut {
			continue
		}
		found := false
		for _, p := range alone {
			if a, b := span(p); a == start && b == end {
				found = true
				break
			}
		}
		if !found {
			return start
		}
	}
	return -1
}

// mayEndItem reports whether an item the text after a line break may unmake may end text: a
// phone number, a card or an SSN, whose digit groups the detectors read over line breaks (7
// digits or more, or a "+", in the groups and separators text ends in, an extension's "x" or
// "ext" among them), or an IBAN (two letters and two digits in it); or text holds a character
// beyond ASCII or an escape, which the detectors may read as a digit.
func mayEndItem(text string) bool {
	for i := 0; i < len(text); i++ {
		if c := text[i]; c >= utf8.RuneSelf || c == '&' || c == '%' || c == '\\' {
			return true
		}
	}
	for i := 0; i+4 <= len(text); i++ {
		if isAlpha(text[i]) && isAlpha(text[i+1]) && isDigit(text[i+2]) && isDigit(text[i+3]) {
			return true
		}
	}
	digits := 0
	for k := len(text); k > 0; k-- {
		switch c := text[k-1]; {
		case isDigit(c):
			digits++
		case c == '+':
			return true
		case isCardSep(c) || c == '\n' || c == '\r' || c == '(' || c == ')' || c == '_' || c == '#':
		case isAlpha(c):
			// an extension's marker after digits goes on with them ("555 2671 ext. 12")
			w := k - 1
			for w > 0 && isAlpha(text[w-1]) {
				w--
			}
			rest := strings.TrimRight(text[:w], " .:#")
			if m := strings.ToLower(text[w:k]); (m == "x" || m == "ext" || m == "extension") &&
				rest != "" && isDigit(rest[len(rest)-1]) {
				k = w + 1 // the loop goes on before the marker
				continue
			}
			return digits >= minNationalDigits
		default:
			return digits >= minNationalDigits
		}
	}
	return digits >= minNationalDigits
}

// mayRunAcross reports whether an item may run across the line break that ends at cut: the
// line before it ends (its carriage return aside) in a letter or a digit (a card's, a phone
// number's or an IBAN's groups, an extension, an escape's hex), a closing parenthesis (an
// area code), the ";" of a character reference, or a character beyond ASCII, which the
// detectors may read as a digit or skip; or in one of those and the separator of a card's,
// spaces, or a digit and the separator of a card's, a phone number's or an SSN's groups
// but a colon, that the next line goes on from (wrapEnd: "4111 1111 ", "4111-1111-", "415-555-",
// "123 - 45 - ", "123 / 45 / ").
func mayRunAcross(buf string, cut int) bool {
	k := cut - 1 // the line break
	if k > 0 && buf[k-1] == '\r' {
		k--
	}
	for e := k; k > 0 && e-k < maxCardGap && (buf[k-1] == ' ' || buf[k-1] == '\t'); k-- {
	}
	if k > 0 && buf[k-1] == ':' {
		// no item runs on from a colon over a line break: the groups of a card joined by
		// colons are read on one line (cardLayout)
		return false
	}
	if k > 0 && (isCardSep(buf[k-1]) || buf[k-1] == '_') {
		// a separator after a digit: a sentence's full stop after a word is none
		k--
		for e := k; k > 0 && e-k < 1 && buf[k-1] == ' '; k-- {
		}
		return k > 0 && isDigit(buf[k-1])
	}
	if k == 0 {
		return false
	}
	c := buf[k-1]
	return isAlnum(c) || c == ')' || c == ';' || c >= utf8.RuneSelf
}

// cleanCalls returns the tool calls the model made, once the stream has
// ended, to release: with "redact" their arguments masked (still valid
// JSON), with "block" as they are when none holds personal data. The
// refusal names the tool and the argument's JSON Pointer, never the data.
func (m *Middleware) cleanCalls(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
	if m.Action == ActionRedact {
		return mask.Calls(m.scanner.Redact, m.scanner.items)(calls)
	}
	for _, tc := range calls {
		var ms []Match
		// Decoded as written: a key written twice holds two members, which the model reads
		// both and "redact" masks both (mask.Args), where a decoder into a map keeps the last.
		if args, err := jsonvalue.DecodeOrdered(string(tc.Arguments)); err == nil {
			ms = m.scanner.ScanValue(args)
		} else {
			ms = m.scanner.Find(string(tc.Arguments))
		}
		if len(ms) == 0 {
			if it, split := mask.SplitInJSON(string(tc.Arguments), m.scanner.items); split {
				// cut across values adjacent as written, not in the order of their keys
				return nil, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf(
					"the model's call of tool %s: its arguments contain personal data (%s, cut across their strings)", tc.Name, it.Label)}
			}
			// read as lines, as the call sent back is read and "redact" masks it (mask.Args)
			if lines := m.scanner.Find(scanned.ArgsText(tc)); len(lines) > 0 {
				return nil, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf(
					"the model's call of tool %s: its arguments contain personal data (%s, read across their keys and strings)", tc.Name, kindsOf(lines))}
			}
			continue
		}
		where := "argument " + ms[0].Path
		if ms[0].Path == "" {
			where = "its arguments"
		}
		return nil, &runtime.BlockedError{Layer: m.name,
			Message: fmt.Sprintf("the model's call of tool %s: %s contains personal data (%s)", tc.Name, where, kindsOf(ms))}
	}
	return calls, nil
}

// cleanOutput returns a part of the model's output to release: redacted,
// or with "block" as it is when it holds no personal data.
func (m *Middleware) cleanOutput(text string) (string, error) { return m.clean(text, phoneMemo{}) }

// clean is cleanOutput with memo, the verdicts on the phone candidates read before.
func (m *Middleware) clean(text string, memo phoneMemo) (string, error) {
	if m.Action == ActionRedact {
		red, _ := m.scanner.redact(text, memo)
		return red, nil
	}
	if ms := m.scanner.find(text, 0, memo); len(ms) > 0 {
		return "", m.outputBlocked(ms)
	}
	return text, nil
}

// outputBlocked is the refusal of output holding the items ms.
func (m *Middleware) outputBlocked(ms []Match) error {
	return &runtime.BlockedError{Layer: m.name,
		Message: fmt.Sprintf("the model's output contains personal data (%s)", kindsOf(ms))}
}

// outputLookback is how much of the output released before a part of it
// is read with the part: the detectors look back contextWindow bytes of
// the text as they read it for a phone word or an SSN's label, and a
// character they skip or fold may take several bytes.
const outputLookback = 8 * contextWindow

// maxOutputLookback bounds the output released that a part is read after,
// however many characters the detectors skip in it.
const maxOutputLookback = 512 * contextWindow

// outputTail is what is kept of the output released, before followed by
// text, for the next part to be read after (linehold.Filter.Tail): its last
// outputLookback bytes, or, when the detectors skip characters in them
// (zero-width ones, marks on nothing, U+FFFD, escapes of them) so that a
// reading of them (forms) is shorter than a phone word or an SSN's label
// and the window after it, twice as many, and so on up to
// maxOutputLookback: "call me on" followed by a hundred zero-width spaces
// still counts for the number on the next line, as in the whole text.
func outputTail(before, text string) string {
	s := before + text[max(0, len(text)-maxOutputLookback):]
	for n := outputLookback; ; n *= 2 {
		t := linehold.Tail(s, n)
		if len(t) == len(s) || n >= maxOutputLookback || readsBack(t) {
			return t
		}
	}
}

// contextOf returns the end of before the detectors read a text after it with: its last
// 2*contextWindow+maxWordLen bytes, or, while a reading of them is shorter (readsBack),
// twice as many, and so on up to the whole of before.
func contextOf(before string) string {
	for n := 2*contextWindow + maxWordLen; ; n *= 2 {
		if t := linehold.Tail(before, n); len(t) == len(before) || readsBack(t) {
			return t
		}
	}
}

// readsBack reports whether each reading of before the detectors make
// holds 2*contextWindow+maxWordLen bytes: the window of a word that names
// an item, the word, and a window more.
func readsBack(before string) bool {
	const need = 2*contextWindow + maxWordLen
	plain := true
	for i := 0; i < len(before) && plain; i++ {
		c := before[i]
		plain = c < utf8.RuneSelf && c != '&' && c != '%' && c != '\\'
	}
	if plain {
		return len(before) >= need
	}
	for _, f := range forms(before) {
		if len(f.text) < need {
			return false
		}
	}
	return true
}

// cleanOutputAfter is cleanOutput for a part of the output that follows
// before, the end of the output released: the part is read after it, as
// in the whole text, so that "call me on" ending the line released before
// makes a phone number of "9472 7916". An item it finds running back into
// before (which the hold keeps from happening) has its part in text masked.
func (m *Middleware) cleanOutputAfter(before, text string) (string, error) {
	return m.cleanAfter(before, text, phoneMemo{})
}

// cleanAfter is cleanOutputAfter with memo, the verdicts on the phone candidates read before
// (outputHold.phones).
func (m *Middleware) cleanAfter(before, text string, memo phoneMemo) (string, error) {
	if !mayNumber(text) || !mayName(before) {
		out, err := m.clean(text, memo)
		if b := strings.TrimRight(before, "\r\n"); (err == nil && out == text) || !mayNumber(text) || !mayRunAcross(b+"\n", len(b)+1) {
			return out, err
		}
		// What text starts with may be read with the groups ending before, which the
		// whole text reads as one number ("...-6789" then "4111 1111 1111 1111"): text
		// is read after before.
	}
	whole := before + text
	if m.Action == ActionRedact {
		pre, _ := m.scanner.Redact(before)
		if out, _ := m.scanner.Redact(whole); strings.HasPrefix(out, pre) {
			return out[len(pre):], nil
		}
		// An item runs back into before: its part in text is masked, and the rest
		// read as Redact reads it.
		var b strings.Builder
		last := 0
		for _, x := range m.scanner.Find(whole) {
			if x.End <= len(before) || x.End-len(before) <= last {
				continue
			}
			b.WriteString(text[last:max(last, x.Start-len(before))])
			b.WriteString(Placeholder(x.Kind))
			last = x.End - len(before)
		}
		red, _ := m.scanner.Redact(b.String() + text[last:])
		return red, nil
	}
	var ms []Match
	for _, x := range m.scanner.Find(whole) {
		if x.End > len(before) {
			ms = append(ms, x)
		}
	}
	if len(ms) > 0 {
		return "", m.outputBlocked(ms)
	}
	return text, nil
}

// maxWordLen bounds the length of an ASCII word of phoneWords and ssnWords.
const maxWordLen = len("social security")

// mayNumber reports whether text may hold an item that a word before it
// decides: one starting (a digit, "+" or "(") within contextWindow bytes
// of its start, the farthest a word before it counts from. A character
// beyond ASCII or an escape there may be read as a digit, or skipped, which
// brings what follows nearer: the text is read with the words before then.
func mayNumber(text string) bool {
	for i := 0; i < len(text) && i < contextWindow; i++ {
		if c := text[i]; isDigit(c) || c == '+' || c == '(' || c >= utf8.RuneSelf || c == '&' || c == '%' || c == '\\' {
			return true
		}
	}
	return false
}

// mayName reports whether before may hold a phone word, an SSN's label or a
// word naming a card (phoneWords, phoneWordsUnspaced, ssnWords, cardWords), as the detectors read it: it
// holds a character beyond ASCII or an escape (which the detectors may read
// as a word, or skip), or one of the ASCII words ends in its last
// contextWindow bytes (it starts at most maxWordLen bytes earlier).
func mayName(before string) bool {
	for i := 0; i < len(before); i++ {
		if c := before[i]; c >= utf8.RuneSelf || c == '&' || c == '%' || c == '\\' {
			return true
		}
	}
	lower := strings.ToLower(before[max(0, len(before)-contextWindow-maxWordLen):])
	for _, ws := range [][]string{phoneWords, ssnWords, cardWords} {
		for _, w := range ws {
			if strings.Contains(lower, w) {
				return true
			}
		}
	}
	return false
}

// WrapTool implements runtime.ToolWrapper. The arguments are scanned (every
// string, and numbers as their digits; with "block" object keys too); with
// "block" a match blocks the call naming the argument's JSON Pointer (for a
// key, the object's) and kind, with "redact" the inner layers
// and the tool see a redacted copy (the caller's map is never modified, and
// layers outside this one see the original once it returns). The result is
// read as redact reads it (mask.Result: its text, its structured content,
// bytes, raw JSON as written, and the printable stretches of the data of an
// image or a blob): with "redact" the layers outside and the model get it
// masked, with "block" a result holding personal data fails the call with a
// *runtime.BlockedError naming the tool and the kinds, marked runtime.Ran
// (the tool ran). With either action the text of a failed call's error is
// masked (mask.Results): the model reads it as it reads a result. A result
// with no JSON form (a NaN) cannot be checked and fails the call.
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	if m.Action == ActionBlock {
		next = m.blockResults(next)
	}
	next = mask.Results(next, m.scanner.Redact, m.scanner.items, m.name, "personal data")
	if m.Action == ActionBlock {
		return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			if err := m.blockArgs(c); err != nil {
				return nil, err
			}
			return next(ctx, c)
		}
	}
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		orig := c.Args
		plain, err := jsonArgs(orig)
		if err != nil {
			return nil, m.unchecked(c, err)
		}
		red, n := m.scanner.RedactValue(plain)
		if n == 0 {
			return next(ctx, c)
		}
		args, ok := red.(map[string]any)
		if !ok {
			return next(ctx, c)
		}
		c.Args = args
		v, err := next(ctx, c)
		c.Args = orig
		return v, err
	}
}

// blockResults wraps next so that a result holding personal data, read as
// mask.Result reads it, fails the call with the refusal of action "block",
// marked runtime.Ran.
func (m *Middleware) blockResults(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if err != nil {
			return v, err
		}
		var kinds []Match
		find := func(text string) (string, int) {
			red, n := m.scanner.Redact(text)
			if n > 0 {
				kinds = append(kinds, m.scanner.Find(text)...)
			}
			return red, n
		}
		if _, n, rerr := mask.Result(v, find, m.scanner.items); rerr != nil || n == 0 {
			return v, nil // one that cannot be checked fails outside (mask.Results)
		}
		found := "personal data"
		if len(kinds) > 0 {
			found += " (" + kindsOf(kinds) + ")"
		}
		return nil, runtime.Ran(&runtime.BlockedError{Layer: m.name,
			Message: fmt.Sprintf("tool %s: its result contains %s", c.Name, found)})
	}
}

// blockArgs returns the refusal of action "block" for arguments holding
// personal data, or nil.
func (m *Middleware) blockArgs(c *runtime.ToolCall) error {
	args, err := jsonArgs(c.Args)
	if err != nil {
		return m.unchecked(c, err)
	}
	ms := m.scanner.ScanValue(args)
	if len(ms) == 0 {
		return nil
	}
	where := "argument " + ms[0].Path
	if ms[0].Path == "" {
		where = "an argument name" // a key of the arguments themselves
	}
	return &runtime.BlockedError{Layer: m.name,
		Message: fmt.Sprintf("tool %s: %s contains personal data (%s)", c.Name, where, kindsOf(ms))}
}

// AdmitTool implements runtime.ToolAdmitter: with action "block", the
// refusal WrapTool makes. With "redact" a proposed call whose arguments hold
// personal data is refused as well: the call is relayed to the client that
// runs it (agentc serve), where no redaction can reach the tool, and the
// arguments are not rewritten on the way, which would have the client act
// on masked values (a refund to "[CARD]") and keep a transcript the model
// did not write. Such a call is never relayed with the data in clear.
func (m *Middleware) AdmitTool(_ context.Context, c *runtime.ToolCall) error {
	err := m.blockArgs(c)
	if err == nil || m.Action == ActionBlock {
		return err
	}
	var be *runtime.BlockedError
	if errors.As(err, &be) {
		be.Message += "; action redact cannot mask a proposed call the client runs, so it is not relayed"
	}
	return err
}

var (
	_ runtime.ChatWrapper  = (*Middleware)(nil)
	_ runtime.ToolWrapper  = (*Middleware)(nil)
	_ runtime.ToolAdmitter = (*Middleware)(nil)
	_ runtime.RunEnder     = (*Middleware)(nil)

	_ runtime.GroundingScreener = (*Middleware)(nil)
)

// EndRun implements runtime.RunEnder: it forgets what the run's calls
// scanned.
func (m *Middleware) EndRun(runID string) { m.seen.EndRun(runID) }

// heldFrom returns len(text), text ending in a line break, or the start of
// the line an item may run on from into the lines still to come: the line
// that holds the last maxCardDigits-1 digits of the run of digit groups the
// text ends in (joined by the separators of a card's groups, line breaks,
// and the "+" and parentheses of a phone number, which may also end in an
// area code in parentheses: "call (415)" then "555-2671"; the line may end in
// spaces and a separator after the last group, "4111-1111-" then "1111-1111",
// as wrapEnd reads a card over lines, or a dash or a slash after a space,
// "123 - 45 - " or "123 / 45 / " then "6789", as ssnSep joins an SSN's groups), or the line in which an IBAN may begin that the text ends inside
// of, after a whole group (its registered country code and check digits,
// fewer letters and digits after them than its country's IBANs have). The
// text is read folded as the detectors read it (foldText):
// full-width and other digits they take for ASCII ones count as digits,
// Unicode spaces and dashes as separators, and a zero-width character at the
// end of a line does not hide the digit before it; and decoded as they read
// it too (textnorm.Unescape), so that a digit written as an escape ("&#53;")
// counts as one.
func heldFrom(text string) int {
	f := foldText(text, false)
	at := heldIn(f.text, f.span)
	if d, ok := textnorm.Unescape(text, false); ok {
		// a digit written as an escape ("&#53;", "%35") is one
		g := foldText(d.Text, false)
		if k := heldIn(g.text, func(s, e int) (int, int) { return d.Span(g.span(s, e)) }); k >= 0 && (at < 0 || k < at) {
			at = strings.LastIndexByte(text[:k], '\n') + 1 // an escaped line break is none
		}
	}
	if at < 0 {
		return len(text)
	}
	return at
}

// heldIn is heldFrom of a reading t of the text, span mapping it back, or
// -1 when no line is held.
func heldIn(t string, span func(int, int) (int, int)) int {
	end := len(t) - 1 // the folded text ends in the line break
	if end > 0 && t[end-1] == '\r' {
		end--
	}
	from := len(t)
	// a card's line may end in spaces and in its groups' separator (wrapEnd)
	e := end
	for e > 0 && end-e < maxCardGap && (t[e-1] == ' ' || t[e-1] == '\t') {
		e--
	}
	// but not in a colon: no item runs on from one over a line break (the groups of a card
	// joined by colons are read on one line, cardLayout), and a heading ("Step 3:", "Q3
	// 2024:") has nothing to wait for (mayRunAcross)
	colon := e > 0 && t[e-1] == ':'
	if colon {
	} else if e > 1 && t[e-1] != ' ' && t[e-1] != '\t' && isCardSep(t[e-1]) && isDigit(t[e-2]) {
		e--
	} else if e > 2 && (t[e-1] == '-' || t[e-1] == '/') && t[e-2] == ' ' && isDigit(t[e-3]) {
		e -= 2 // a dash or a slash after a space (ssnSep: "123 - 45 - ", "123 / 45 / ", "123 -45 -")
	}
	if !colon && (e > 0 && isDigit(t[e-1]) || end > 1 && t[end-1] == ')' && isDigit(t[end-2])) {
		k, digits := end, 0
		for k > 0 && digits < maxCardDigits-1 {
			b := t[k-1]
			if isDigit(b) {
				digits++
			} else if !isCardSep(b) && b != '_' && b != '\n' && b != '\r' && b != '(' && b != ')' && b != '+' {
				break
			}
			k--
		}
		from = k
	}
	if i := openIBAN(t, end); i >= 0 {
		from = min(from, i)
	}
	if from == len(t) {
		return -1
	}
	line := strings.LastIndexByte(t[:from], '\n') + 1
	if line == 0 {
		return 0
	}
	// The line break before line is an ASCII one of text: release up to it.
	_, at := span(line-1, line)
	return at
}

// openIBAN returns where an IBAN may begin that t[:end] ends inside of,
// wrapped after a whole group, or -1.
func openIBAN(t string, end int) int {
	k, n := end, 0
	for k > 0 {
		c := t[k-1]
		if isAlnum(c) {
			if n == maxIBANChars {
				break
			}
			n++
		} else if c != ' ' && c != '-' && c != '\n' && c != '\r' {
			break
		}
		k--
	}
	for i := k; i+4 <= end; i++ {
		if !isAlpha(t[i]) || !isAlpha(t[i+1]) || !isDigit(t[i+2]) || !isDigit(t[i+3]) || !leftOK(t, i) {
			continue
		}
		n := 0
		for j := i; j < end; j++ {
			if isAlnum(t[j]) {
				n++
			}
		}
		if want := ibanLengths[string([]byte{upper(t[i]), upper(t[i+1])})]; n < want && n%4 == 0 {
			return i
		}
	}
	return -1
}

// unchecked is the refusal of arguments that cannot be scanned.
func (m *Middleware) unchecked(c *runtime.ToolCall, err error) error {
	return &runtime.BlockedError{Layer: m.name,
		Message: fmt.Sprintf("tool %s: the arguments cannot be checked for personal data: %v", c.Name, err)}
}

// jsonArgs returns the arguments in the shapes the scanner reads
// (jsonvalue.ToPlain): args itself, or their JSON form, which is what the
// tool is sent, when a value has another Go type (a host's struct,
// []map[string]any or map[string]int64 would otherwise be skipped).
// Arguments with no JSON form (a NaN) are an error.
func jsonArgs(args map[string]any) (map[string]any, error) {
	v, err := jsonvalue.ToPlain(args)
	if err != nil {
		return nil, err
	}
	out, _ := v.(map[string]any)
	return out, nil
}
