package contentfilter

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "content_filter"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTurn},
		Traits: []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:    "blocks banned keywords and regexes",
		New:    func() runtime.Middleware { return &Middleware{OnError: "closed"} },
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

	name   string
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
	return nil
}

func (m *Middleware) check(what, text string) error {
	match, ok := m.filter.Check(text)
	if !ok {
		return nil
	}
	return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("%s contains banned %s %q", what, match.Kind, match.Rule)}
}

// WrapChat implements runtime.ChatWrapper: the latest input is checked
// before the inner layers run: every message after the last assistant
// message (runtime.LatestInput), user text and text parts, and tool results.
// The streamed text is not checked (that would hold the stream back): put a
// guard with phase "after" or a judge inside the chain to vet it. The tool
// calls the model requests are checked: their fragments are held until the
// stream ends (text passes at once), the arguments are checked whole, and a
// match blocks the call before any of its tool calls reaches the caller.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, msg := range runtime.LatestInput(c.Request.Messages) {
			if msg.Role == "user" {
				if err := m.check("input", msg.Text()); err != nil {
					return err
				}
			}
			for _, r := range msg.ToolResults() {
				if err := m.check("tool result", r); err != nil {
					return err
				}
			}
		}
		return runtime.HoldToolCalls(ctx, c, next, yield, func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
			for _, tc := range calls {
				if err := m.check("tool call "+tc.Name+" arguments", tc.ArgsText()); err != nil {
					return nil, err
				}
			}
			return calls, nil
		})
	}
}

// WrapTurn implements runtime.TurnWrapper: the turn's input is checked before
// the turn runs, and its output after it (a turn's output is returned whole,
// so checking it holds nothing back); a match in either blocks. A turn that
// already failed is returned as is.
func (m *Middleware) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		if err := m.check("input", c.Input); err != nil {
			return "", err
		}
		out, err := next(ctx, c)
		if err != nil {
			return out, err
		}
		if berr := m.check("output", out); berr != nil {
			return "", berr
		}
		return out, nil
	}
}

var (
	_ runtime.ChatWrapper = (*Middleware)(nil)
	_ runtime.TurnWrapper = (*Middleware)(nil)
)
