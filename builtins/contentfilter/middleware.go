package contentfilter

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "content_filter"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTurn},
		Traits:  []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:     "blocks banned keywords and regexes in every message the model reads and in the tool calls it makes",
		New:     func() runtime.Middleware { return &Middleware{OnError: "closed", System: true} },
	})
}

// Middleware is the content_filter layer; its exported fields are its config
// (schemas/content_filter.cue).
type Middleware struct {
	// Keywords block case-insensitively on word boundaries.
	Keywords []string `json:"keywords,omitempty"`
	// Patterns are RE2 expressions that block.
	Patterns []string `json:"patterns,omitempty"`
	// OnError is accepted for the schema; matching has no failure mode.
	OnError string `json:"on_error"`
	// System checks the messages of role "system" too (the default); false
	// leaves them, the operator's own instructions, unchecked.
	System bool `json:"system"`
	// Grounding decides what a grounding item the layer flags does
	// (runtime.GroundingScreener): runtime.GroundingBlock (the default)
	// blocks the call, naming the item; runtime.GroundingDrop leaves the
	// item out of the block.
	Grounding string `json:"grounding,omitempty"`

	name   string
	seen   scanned.Record
	filter *Filter
}

// Provision builds the filter once. An invalid pattern is an error naming its
// index in patterns.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	for i, k := range m.Keywords {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("keywords[%d]: empty keyword", i)
		}
	}
	for i, p := range m.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("patterns[%d]: invalid RE2 expression %q: %w", i, p, err)
		}
	}
	f, err := New(Config{Keywords: m.Keywords, Patterns: m.Patterns})
	if err != nil {
		return err
	}
	m.filter = f
	if len(m.Keywords) == 0 && len(m.Patterns) == 0 {
		b.Logger.Warn("content_filter layer has no keywords and no patterns: it never blocks")
	}
	return nil
}

// Validate checks on_error.
func (m *Middleware) Validate() error {
	if m.OnError != "closed" && m.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, m.OnError)
	}
	return runtime.CheckGroundingSetting(m.Grounding)
}

// ScreenGrounding implements runtime.GroundingScreener.
func (m *Middleware) ScreenGrounding(_ context.Context, text string) (string, bool) {
	match, ok := m.filter.Check(text)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("banned %s %q", match.Kind, match.Rule), m.Grounding == runtime.GroundingDrop
}

func (m *Middleware) check(what, text string) error {
	match, ok := m.filter.Check(text)
	if !ok {
		return nil
	}
	return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("%s contains banned %s %q", what, match.Kind, match.Rule)}
}

// WrapChat implements runtime.ChatWrapper: every text of the transcript the
// model will read is checked before the inner layers run: the text of every
// message (user, assistant, and system unless System is false), every tool
// result, the arguments of the tool calls earlier assistant messages carry,
// and (unless System is false) the definitions of the tools offered, so a banned word placed in an earlier turn of the history a gateway
// client sends is found as one in the latest message is. The texts of
// consecutive messages of one role, which a provider sends as one turn,
// are read together too, as are tool results and the user's text next to
// them, which Anthropic's API sends as one user turn (scanned.ScanTurns), with the cut readings of a
// turn's pieces and the system messages apart as one system prompt, so a
// word cut across two of them, or among more, is found. Each text found
// clean is recorded for the run (scanned.Record), as is the model's own
// output that passed through the layer, so an agent loop's history is not
// checked again at every step; a text the caller changed or added always
// is. The streamed text is not checked (that would hold the stream back):
// put a guard with phase "after" or a judge inside the chain to vet it. The
// tool calls the model requests are checked: their fragments are held until
// the stream ends (text passes at once, except, in a call that asks for
// thinking, what follows a call: runtime.HoldToolCalls), the arguments are checked whole, and
// a match blocks the call before any of its tool calls reaches the caller.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		run := c.Meta.Run.ID
		if err := m.seen.Scan(c, m.System, m.System, func(i int, kind, text string) error {
			what := "input"
			switch kind {
			case scanned.KindToolDef:
				return m.check(fmt.Sprintf("tool %s definition", c.Request.Tools[i].Name), text)
			case scanned.KindToolResult:
				what = "tool result"
			case scanned.KindToolCall:
				what = "tool call arguments"
			case scanned.KindAttachment:
				what = "attachment"
			case scanned.KindNames:
				what = "names"
			case scanned.KindSummary:
				what = scanned.KindSummary
			case scanned.KindResponseFormat:
				return m.check("response format", text)
			}
			return m.check(fmt.Sprintf("message %d %s", i, what), text)
		}); err != nil {
			return err
		}
		msgs := c.Request.Messages
		if err := m.seen.ScanTurns(c, m.System, func(i int, kind, text string) error {
			if kind == scanned.KindSystem || kind == scanned.KindSystemCut {
				last := i
				for k := range msgs {
					if msgs[k].Role == "system" && !scanned.IsGrounding(&msgs[k]) {
						last = k
					}
				}
				return m.check(fmt.Sprintf("system messages %d to %d (one system prompt) input", i, last), text)
			}
			if last := scanned.SentTurnEnd(msgs, i) - 1; last > i {
				return m.check(fmt.Sprintf("messages %d to %d (one turn) input", i, last), text)
			}
			return m.check(fmt.Sprintf("message %d input", i), text)
		}); err != nil {
			return err
		}
		out := scanned.NewOutput()
		err := runtime.HoldToolCalls(ctx, c, next, func(d runtime.Delta) bool {
			out.Write(d.Text)
			return yield(d)
		}, func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
			for _, tc := range calls {
				text := scanned.ArgsText(tc)
				if err := m.check("tool call "+tc.Name+" arguments", text); err != nil {
					return nil, err
				}
				m.seen.Add(run, text)
			}
			return calls, nil
		})
		if err == nil && !c.Stopped {
			m.seen.AddOutput(run, out.Digest())
		}
		return err
	}
}

// EndRun implements runtime.RunEnder: it forgets what the run's calls
// checked.
func (m *Middleware) EndRun(runID string) { m.seen.EndRun(runID) }

// WrapTurn implements runtime.TurnWrapper: the turn's input is checked before
// the turn runs, and its output after it, with the text its earlier answers
// wrote beside their tool calls (runtime.TurnCall.Earlier), which the host
// shows in the transcript (a turn's output is returned whole, so checking
// it holds nothing back); a match in any blocks. A turn that failed has no
// output, but the text of its answers is checked all the same (the agent
// loop hands it over), and so is the output a host's body returned with
// its error, unless it ended final (blocked, over budget, in doubt), which
// is returned as is.
func (m *Middleware) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		if err := m.check("input", c.Input); err != nil {
			return "", err
		}
		out, err := next(ctx, c)
		if err != nil && runtime.Classify(err).Final() {
			return out, err
		}
		if err == nil || out != "" {
			// A body that failed other than final hands back what
			// output it has with its error: the host gets it.
			if berr := m.check("output", out); berr != nil {
				return "", berr
			}
		}
		for _, text := range c.Earlier() {
			if berr := m.check("output", text); berr != nil {
				return "", berr
			}
		}
		return out, err
	}
}

var (
	_ runtime.ChatWrapper = (*Middleware)(nil)
	_ runtime.TurnWrapper = (*Middleware)(nil)
	_ runtime.RunEnder    = (*Middleware)(nil)

	_ runtime.GroundingScreener = (*Middleware)(nil)
)
