package redact

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/linehold"
	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "redact"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitRewritesMessages},
		Doc:     "masks secret patterns in tool results, in the transcript sent to the model and in its output",
		New:     func() runtime.Middleware { return &Middleware{Defaults: true} },
	})
}

// Middleware is the redact layer; its exported fields are its config
// (schemas/redact.cue).
type Middleware struct {
	// Patterns are extra RE2 expressions to mask; pattern i masks as
	// "[REDACTED:pattern-i]".
	Patterns []string `json:"patterns,omitempty"`
	// Defaults enables DefaultPatterns.
	Defaults bool `json:"defaults"`

	name     string
	redactor *Redactor
	seen     scanned.Record
}

// Provision compiles the rules once. An invalid pattern is an error naming its
// index in patterns.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	cfg := Config{DisableDefaults: !m.Defaults}
	for i, p := range m.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("patterns[%d]: invalid RE2 expression %q: %w", i, p, err)
		}
		cfg.Patterns = append(cfg.Patterns, Pattern{ID: fmt.Sprintf("pattern-%d", i), Regex: p})
	}
	r, err := New(cfg)
	if err != nil {
		return err
	}
	m.redactor = r
	if !m.Defaults && len(m.Patterns) == 0 {
		b.Logger.Warn("redact layer has defaults off and no patterns: it masks nothing")
	}
	return nil
}

// WrapTool implements runtime.ToolWrapper: a successful result is returned
// with its secrets masked, and a failed call's error text too
// (mask.Results): the model reads it as it reads a result. A result with no
// JSON form (a NaN) cannot be checked: the call fails with a permanent error
// marked runtime.Ran.
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return mask.Results(next, m.redactor.Redact, m.redactor.items, m.name, "secrets")
}

// MaskText masks text as WrapTool masks a failed call's error on its way
// out: a layer inside this one that records the error (audit, log) records
// the text the caller reads. The layer must be provisioned.
func (m *Middleware) MaskText(text string) string {
	red, _ := m.redactor.Redact(text)
	return red
}

// WrapChat implements runtime.ChatWrapper: the transcript is masked before
// the model reads it, and the model's streamed output before it reaches the
// outer layers and the caller.
//
// Every text of the transcript is masked on the call's own copy: the text of
// every message, system ones included (content and text parts), every tool
// result (tool messages and tool_result parts; a gateway client sends the
// results of its own tools) and the arguments of earlier tool calls (still
// valid JSON), and the tool definitions and the response format's schema
// the call carries (mask.Transcript.Tools and Format), and the fields no model
// reads but its provider receives (mask.Fields): the prompt cache key and the
// metadata's values are masked, and the end user's id, the safety identifier
// and a stop sequence holding a secret refuse the call, as masking would
// change what they do (mask.Transcript.RefuseFields). The text pieces a
// model reads run together (a message's content and text parts, consecutive
// messages of one role) are also read so, and a secret cut across them is
// masked (mask.Transcript.AcrossParts). A thinking block sent
// back is signed and cannot be masked: one holding a secret is left out, or
// the call fails when the turn cannot go on without it
// (mask.Transcript.Thinking). The
// caller's messages are never modified; it resends the raw text with the
// next call, which is masked again. A text found clean is recorded for the
// run and not scanned again.
//
// A secret can be split across deltas, so the layer buffers by line: text is
// released up to the last line break that has arrived, each release redacted
// as a whole, and the rest of a line is held until its line break or the end
// of the stream. From a "-----BEGIN" marker without its "-----END" marker
// the text is held until the end marker arrives (a PEM private key spans
// lines). A line in which a match of a rule begins that may run on into the
// text still to come is held with the lines after it, until the match ends
// or cannot go on (releasable, openMatch): "password:" or "Authorization:
// Basic" ending a line, the value on a following one, and a configured
// pattern that matches over line breaks ("account number:\s*[0-9]{8}",
// "(?s)BEGIN.*?END") are masked as in a whole text. A match left open over
// more than maxOpenLines lines or maxOpenBytes bytes holds the rest of the
// stream to its end, released masked whole then: the layer fails closed,
// trading that response's latency for the masking. Text held when a tool
// call arrives goes out with it, masked as it stands. Usage reported on held
// deltas rides on the next released one, and the finish reason on the last.
// When the stream fails, held text is dropped, never released unredacted;
// when nothing was released yet the failure stays a pre-stream one for the
// outer layers (a retry may re-invoke).
//
// Thinking is relayed a block at a time, when its text holds no secret: a
// signed block cannot be masked, so one that does is left out, and tool
// calls after it fail the call (linehold.Stream).
//
// Tool calls are masked whole: their argument fragments are held until the
// stream ends (runtime.HoldToolCalls), then every string value of the
// arguments is redacted and the calls are released, one fragment each, with
// arguments that are still valid JSON. Arguments that are not JSON are
// redacted as text.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	inner := func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		return runtime.HoldToolCalls(ctx, c, next, yield, mask.Calls(m.redactor.Redact, m.redactor.items))
	}
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		run := c.Meta.Run.ID
		tr := mask.Transcript{Mask: m.redactor.Redact, Find: m.redactor.items, System: true, Seen: &m.seen}
		joined, split := tr.AcrossParts(c.Request.Messages, m.redactor.items, true)
		msgs, masked := tr.Messages(run, joined)
		masked = masked || split
		msgs, dropped, err := tr.Thinking(run, &c.Request, msgs, m.name, "a secret")
		if err != nil {
			return err
		}
		if err := tr.RefuseFields(run, &c.Request, m.name, "a secret"); err != nil {
			return err
		}
		if err := tr.RefuseURLs(run, c.Request.Messages, m.name, "a secret", false); err != nil {
			return err
		}
		tools, format, defsMasked := tr.Definitions(run, &c.Request)
		key, metadata, fieldsMasked := tr.MaskFields(run, &c.Request)
		if masked || dropped || defsMasked || fieldsMasked {
			orig := c.Request
			c.Request.Messages, c.Request.Tools, c.Request.ResponseFormat = msgs, tools, format
			c.Request.PromptCacheKey, c.Request.Metadata = key, metadata
			defer func() {
				c.Request.Messages, c.Request.Tools, c.Request.ResponseFormat = orig.Messages, orig.Tools, orig.ResponseFormat
				c.Request.PromptCacheKey, c.Request.Metadata = orig.PromptCacheKey, orig.Metadata
			}()
		}
		return linehold.Stream(ctx, c, inner, yield, linehold.Filter{
			Releasable: m.redactor.releasable,
			Layer:      m.name,
			Finding:    "a secret",
			Clean: func(text string) (string, error) {
				red, _ := m.redactor.Redact(text)
				return red, nil
			},
		})
	}
}

// items returns the secrets of text as items to mask (mask.Transcript.AcrossParts): the
// whole match of a rule, of which its "secret" group is masked.
func (r *Redactor) items(text string) []mask.Item {
	var out []mask.Item
	for _, sp := range r.find(text) {
		out = append(out, mask.Item{From: sp.match, To: sp.matchE, Start: sp.start, End: sp.end, With: r.rules[sp.rule].placeholder, Inside: sp.inside})
	}
	return out
}

// EndRun implements runtime.RunEnder: it forgets the run's clean texts.
func (m *Middleware) EndRun(runID string) { m.seen.EndRun(runID) }

// releasable returns how many bytes of buf may be released: up to the last
// line break, but not past an unterminated PEM block, nor past the start of a
// line in which a match of a rule begins that may run on into the text still
// to come (openMatch), nor past the start of a base64 run, a dump or bytes of
// hex the next lines may go on with (linehold.Hold.Encoded). A text held from
// its start for such a run or block is not read again: each line added to it
// is walked once. A match left open over more than maxOpenBytes or
// maxOpenLines holds the rest of the stream to its end (linehold.Hold.Rest),
// released redacted whole then.
func (r *Redactor) releasable(buf string, h *linehold.Hold) int {
	cut := strings.LastIndexByte(buf, '\n') + 1
	if cut == 0 || h.Encoded(buf, cut) == 0 {
		return 0
	}
	if b := h.Unclosed(buf, cut, "-----BEGIN", "-----END"); b >= 0 {
		// Hold from the start of the line that opens the block.
		cut = strings.LastIndexByte(buf[:b], '\n') + 1
	}
	end := cut
	for cut > 0 {
		cut = h.Encoded(buf, cut)
		from := -1
		if cut > 0 {
			from = r.openMatch(buf[:cut])
		}
		if from < 0 {
			break
		}
		if end-from > maxOpenBytes || strings.Count(buf[from:end], "\n") > maxOpenLines {
			h.Rest()
			return strings.LastIndexByte(buf[:from], '\n') + 1
		}
		cut = strings.LastIndexByte(buf[:from], '\n') + 1
	}
	return cut
}

// maxOpenBytes and maxOpenLines bound a match left open (releasable): a rule
// whose match may go on without end ("\s*" in "password:\s*\S+", "[^;]*",
// "(?s)BEGIN.*?END") would otherwise hold the output as long as the model
// writes what it may go on with.
const (
	maxOpenBytes = 4096
	maxOpenLines = 64
)

// openMatch returns where the earliest match begins that may run on from
// text, which ends in a line break, into the text still to come, or -1 when
// none may; text is read as Redact reads it (folded, and decoded), so
// "Bearer" and a no-break space ending a line is held with the next.
func (r *Redactor) openMatch(text string) int {
	from := -1
	var buf [2 + textnorm.MaxUnescapeLevels]form
	for _, f := range formsOf(text, buf[:0]) {
		for i := range r.rules {
			p := r.rules[i].open
			if p == nil {
				continue
			}
			if k := p.openMatch(f.text); k >= 0 {
				if k, _ = f.span(k, k); from < 0 || k < from {
					from = k
				}
			}
		}
	}
	return from
}

var (
	_ runtime.ChatWrapper = (*Middleware)(nil)
	_ runtime.ToolWrapper = (*Middleware)(nil)
	_ runtime.RunEnder    = (*Middleware)(nil)
)
