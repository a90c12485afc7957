package security

import (
	"context"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "security"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTurn},
		Traits: []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:    "blocks prompt-injection patterns in the latest input",
		New:    func() runtime.Middleware { return &Middleware{Defaults: true, OnError: "closed"} },
	})
}

// Middleware is the security layer; its exported fields are its config
// (schemas/security.cue).
type Middleware struct {
	// Patterns are extra RE2 expressions, matched case-insensitively.
	Patterns []string `json:"patterns,omitempty"`
	// Defaults enables DefaultPatterns.
	Defaults bool `json:"defaults"`
	// OnError is accepted for the schema; detection has no failure mode.
	OnError string `json:"on_error"`

	name     string
	detector *Detector
}

// Provision compiles the patterns once. Each configured pattern is tried
// twice: case-insensitively on the original text (so that punctuation in the
// pattern matches as written) and on the normalized text (so that it is as
// tolerant of spacing, case and look-alike tricks as the defaults). Both share
// the id "patterns[i]".
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	cfg := Config{DisableDefaults: !m.Defaults}
	for i, p := range m.Patterns {
		id := fmt.Sprintf("patterns[%d]", i)
		if p == "" {
			return fmt.Errorf("%s: empty pattern", id)
		}
		cfg.Patterns = append(cfg.Patterns,
			Pattern{ID: id, Regex: "(?i)" + p, Raw: true},
			Pattern{ID: id, Regex: "(?i)" + p})
	}
	d, err := New(cfg)
	if err != nil {
		return err
	}
	if !m.Defaults && len(m.Patterns) == 0 {
		b.Logger.Warn("security layer has defaults off and no patterns: it never blocks")
	}
	m.detector = d
	return nil
}

// Validate checks on_error.
func (m *Middleware) Validate() error {
	if m.OnError != "closed" && m.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, m.OnError)
	}
	return nil
}

func (m *Middleware) check(text string) error {
	match, ok := m.detector.Detect(text)
	if !ok {
		return nil
	}
	msg := "prompt injection detected (" + match.PatternID + ")"
	if match.Encoding != "" {
		msg = "prompt injection detected in " + match.Encoding + " text (" + match.PatternID + ")"
	}
	return &runtime.BlockedError{Layer: m.name, Message: msg}
}

// WrapChat implements runtime.ChatWrapper: the latest input is checked
// before the inner layers run, and a match blocks the call. The latest input
// is every message after the last assistant message (runtime.LatestInput):
// user messages, their text parts, and tool results, whether tool messages
// or tool_result parts (an injection often arrives through a tool's output).
// The tool calls the model requests are checked too (an injected model
// passes the injection on through a tool, a sub-agent's prompt): their
// fragments are held until the stream ends while text passes at once, and a
// match in the arguments blocks the call before any tool call reaches the
// caller.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		for _, msg := range runtime.LatestInput(c.Request.Messages) {
			if msg.Role == "user" {
				if err := m.check(msg.Text()); err != nil {
					return err
				}
			}
			for _, r := range msg.ToolResults() {
				if err := m.check(r); err != nil {
					return err
				}
			}
		}
		return runtime.HoldToolCalls(ctx, c, next, yield, m.checkCalls)
	}
}

// checkCalls checks the arguments of the model's tool calls.
func (m *Middleware) checkCalls(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
	for _, tc := range calls {
		if err := m.check(tc.ArgsText()); err != nil {
			return nil, err
		}
	}
	return calls, nil
}

// WrapTurn implements runtime.TurnWrapper: the turn's input is checked before
// the turn runs; a match blocks it.
func (m *Middleware) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		if err := m.check(c.Input); err != nil {
			return "", err
		}
		return next(ctx, c)
	}
}

var (
	_ runtime.ChatWrapper = (*Middleware)(nil)
	_ runtime.TurnWrapper = (*Middleware)(nil)
)
