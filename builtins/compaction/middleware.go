package compaction

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	rplan "github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "compaction"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []rplan.Stage{rplan.StageChat},
		Traits: []runtime.Trait{runtime.TraitRewritesMessages},
		Doc:    "bounds the transcript before the model sees it, never orphaning a tool call from its result",
		New: func() runtime.Middleware {
			return &Middleware{Strategy: StrategyKeepRecent, MaxTokens: 12000, KeepRecent: 6}
		},
	})
}

// The strategies of the compaction layer.
const (
	StrategyKeepRecent = "keep_recent"
	StrategySummarize  = "summarize"
)

// SummaryPrompt is the system prompt of the summary call.
const SummaryPrompt = "Summarize the following conversation excerpt for the assistant that continues it. " +
	"Keep facts, decisions, open questions, names and identifiers; drop pleasantries. Answer with the summary only."

// Middleware is the compaction layer; its exported fields are its config
// (schemas/compaction.cue).
//
// Token counts are the runtime's estimate (runtime.EstimateMessages: about
// four bytes per token plus four per message), the same one max_tokens and
// the meters use, so a budget here means what it means there.
//
// The runtime's Message has no list of requested tool calls, so the layer
// reconstructs the units that must stay together: a tool message belongs to
// the nearest assistant message before it, and is kept or dropped with it. A
// tool message with no assistant message before it is an orphan and is
// dropped (providers reject it). With strategy "summarize" the dropped prefix
// is replaced by one system message (Name "compaction_summary") written by
// the model named in `model`, called directly through the pipeline's model
// clients (not through the chat chain, so it is not metered or retried);
// when that call fails or returns nothing, the layer falls back to
// keep_recent for the call and logs a warning. Compaction rewrites only the
// call's own copy of the transcript; it is idempotent.
type Middleware struct {
	Strategy   string `json:"strategy"`
	MaxTokens  int    `json:"max_tokens"`
	KeepRecent int    `json:"keep_recent"`
	Model      string `json:"model,omitempty"`

	name   string
	client runtime.ModelClient
	logger interface {
		WarnContext(ctx context.Context, msg string, args ...any)
	}
}

// Provision resolves the summary model.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	if m.Strategy == StrategySummarize {
		if m.Model == "" {
			return errors.New(`model is required with strategy "summarize"`)
		}
		c, ok := b.Models()[m.Model]
		if !ok || c == nil {
			return fmt.Errorf("model %q has no client (Deps.Models)", m.Model)
		}
		m.client = c
	}
	return nil
}

// Validate checks the strategy and bounds.
func (m *Middleware) Validate() error {
	switch {
	case m.Strategy != StrategyKeepRecent && m.Strategy != StrategySummarize:
		return fmt.Errorf(`strategy must be "keep_recent" or "summarize", got %q`, m.Strategy)
	case m.MaxTokens < 1:
		return fmt.Errorf("max_tokens must be at least 1, got %d", m.MaxTokens)
	case m.KeepRecent < 1:
		return fmt.Errorf("keep_recent must be at least 1, got %d", m.KeepRecent)
	}
	return nil
}

// syntheticID prefixes the tool-call ids the layer makes up for tool
// messages that carry none.
const syntheticID = "\x00compaction:"

// toLocal converts a runtime transcript, attaching each tool message to the
// nearest assistant message before it.
func toLocal(msgs []runtime.Message) []Message {
	out := make([]Message, len(msgs))
	last := -1
	for i, m := range msgs {
		out[i] = Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		switch m.Role {
		case RoleAssistant:
			last = i
		case RoleTool:
			if last < 0 {
				continue // orphan
			}
			id := m.ToolCallID
			if id == "" {
				id = fmt.Sprintf("%s%d", syntheticID, i)
				out[i].ToolCallID = id
			}
			out[last].ToolCalls = append(out[last].ToolCalls, ToolCall{ID: id})
		}
	}
	return out
}

func toRuntime(msgs []Message) []runtime.Message {
	out := make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		id := m.ToolCallID
		if strings.HasPrefix(id, syntheticID) {
			id = ""
		}
		out[i] = runtime.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: id}
	}
	return out
}

// countTokens is runtime.EstimateMessages for one message.
func countTokens(m Message) int {
	return int(runtime.EstimateTokens(m.Content)) + 4
}

// Compact returns the compacted transcript of msgs and whether it differs
// from msgs. msgs is not modified.
func (m *Middleware) Compact(ctx context.Context, msgs []runtime.Message) ([]runtime.Message, bool) {
	if int(runtime.EstimateMessages(msgs)) <= m.MaxTokens && !hasOrphan(msgs) {
		return msgs, false
	}
	local := toLocal(msgs)
	var out []Message
	if m.Strategy == StrategySummarize {
		var err error
		out, err = Summarize(ctx, local, m.MaxTokens, m.KeepRecent, countTokens, m.summarize)
		if err != nil {
			m.logger.WarnContext(ctx, "summary failed; keeping recent messages", "layer", m.name, "error", err)
			out = nil
		}
	}
	if out == nil {
		out = KeepRecent(local, m.MaxTokens, m.KeepRecent, countTokens)
	}
	return toRuntime(out), true
}

// hasOrphan reports a tool message with no assistant message before it.
func hasOrphan(msgs []runtime.Message) bool {
	for _, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			return false
		case RoleTool:
			return true
		}
	}
	return false
}

// summarize asks the summary model for a summary of msgs.
func (m *Middleware) summarize(ctx context.Context, msgs []Message) (string, error) {
	var b strings.Builder
	for _, msg := range msgs {
		b.WriteString(msg.Role)
		if msg.Name != "" && !IsSummary(msg) {
			b.WriteString(" (" + msg.Name + ")")
		}
		b.WriteString(": ")
		b.WriteString(msg.Content)
		b.WriteString("\n")
	}
	req := &runtime.ChatRequest{Model: m.Model, Messages: []runtime.Message{
		{Role: RoleSystem, Content: SummaryPrompt},
		{Role: RoleUser, Content: b.String()},
	}}
	var out strings.Builder
	err := m.client.Stream(ctx, req, func(d runtime.Delta) bool {
		out.WriteString(d.Text)
		return true
	})
	if err != nil {
		return "", err
	}
	return out.String(), nil
}

// WrapChat implements runtime.ChatWrapper: the call's transcript is compacted
// before the inner layers run and restored on the call once they return.
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		orig := c.Request.Messages
		out, changed := m.Compact(ctx, orig)
		if !changed {
			return next(ctx, c, yield)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Request.Messages = out
		err := next(ctx, c, yield)
		c.Request.Messages = orig
		return err
	}
}

var _ runtime.ChatWrapper = (*Middleware)(nil)
