package compaction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
	rplan "github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "compaction"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []rplan.Stage{rplan.StageChat},
		Traits:  []runtime.Trait{runtime.TraitRewritesMessages},
		Doc:     "bounds the transcript before the model sees it, never orphaning a tool call from its result nor dropping a call to a side-effecting tool",
		New: func() runtime.Middleware {
			return &Middleware{Strategy: StrategyKeepRecent, MaxTokens: 12000, KeepRecent: 6, SummaryTimeout: runtime.Duration(DefaultSummaryTimeout)}
		},
	})
}

// The strategies of the compaction layer.
const (
	StrategyKeepRecent = "keep_recent"
	StrategySummarize  = "summarize"
	StrategyImportance = "importance"
)

// PinKey is the message metadata key that pins a message: compaction keeps
// a message whose Metadata[PinKey] is "true" (with its tool-call unit).
const PinKey = "pin"

// SummaryKey is the message metadata key that marks a summary the layer
// wrote: its value is "true". Metadata is the host's and never comes from a
// client of agentc serve, so a client cannot pass its own system message for
// a summary by naming it "compaction_summary".
const SummaryKey = runtime.SummaryKey

// SummaryPrompt is the system prompt of the summary call.
const SummaryPrompt = "Summarize the following conversation excerpt for the assistant that continues it. " +
	"Keep facts, decisions, open questions, names and identifiers; drop pleasantries. Answer with the summary only."

// Middleware is the compaction layer; its exported fields are its config
// (schemas/compaction.cue).
//
// Token counts are the runtime's estimate (runtime.EstimateMessages:
// runtime.EstimateTokens, never below what OpenAI's tokenizers make of
// common text, plus four per message), the same one max_tokens and
// the meters use, so a budget here means what it means there.
//
// An assistant message is kept or dropped together with the results of the
// tool calls it requested, linked by id: tool messages naming the call and
// messages carrying a tool_result part for it. A tool message of a transcript
// whose assistant messages do not list their calls belongs to the nearest
// assistant message before it. A tool result that answers no call is an
// orphan and is dropped (providers reject it). With strategy "summarize" the dropped prefix
// is replaced by one system message (Name "compaction_summary", metadata
// SummaryKey "true": only a message so marked is taken as an earlier summary; and
// runtime.GroundingKey "true", so that the detectors inside the layer read it whatever their
// system setting, as the transcript's messages (runtime.SummaryKey); those outside it that screen
// text, runtime.GroundingScreener, read it before it is sent: see screenSummary) written by
// the model named in `model`, called through the chat chain below the layer
// (runtime.OwnCall: the layers inside compaction meter, retry, fail over and
// trace it; compaction itself never sees it); when that call fails, returns nothing or returns a summary that does not fit
// the budget (ErrSummaryTooLong), the layer falls back to
// keep_recent for the call and logs a warning. Compaction rewrites only the
// call's own copy of the transcript; it is idempotent.
type Middleware struct {
	Strategy   string `json:"strategy"`
	MaxTokens  int    `json:"max_tokens"`
	KeepRecent int    `json:"keep_recent"`
	Model      string `json:"model,omitempty"`
	// MaxMessages bounds the number of messages (0: none).
	MaxMessages int `json:"max_messages,omitempty"`
	// KeepFirstUserTurn always keeps the first user message; strategy
	// "importance" always does.
	KeepFirstUserTurn bool `json:"keep_first_user_turn,omitempty"`
	// SummaryTimeout bounds the summarizing of one call
	// (DefaultSummaryTimeout): every summary call it makes (one whose
	// summary does not fit is followed by another) ends by one deadline;
	// past it the layer falls back to keep_recent.
	SummaryTimeout runtime.Duration `json:"summary_timeout,omitempty"`

	// window is the summary model's declared context_tokens (0: none).
	window int
	// inputCap is the smallest limit of the max_tokens layers inside this
	// one without a when, which read the summary call (0: none).
	inputCap int
	name     string
	// effects reports whether a tool is declared side_effecting: a call
	// to one and its result are never dropped (see toLocal).
	effects func(tool string) bool
	client  runtime.ModelClient
	// screens are the layers outside this one that screen text
	// (runtime.GroundingScreener), outermost first: they read the summary.
	screens []screen
	logger  interface {
		WarnContext(ctx context.Context, msg string, args ...any)
		DebugContext(ctx context.Context, msg string, args ...any)
	}

	// leftCalls and leftMsgs count the summary calls that left dropped
	// messages out, and those messages (see LeftOut).
	leftCalls, leftMsgs atomic.Int64
	// warnedAt is when the layer last warned of messages left out (unix
	// nanoseconds, 0: never), warnedCalls leftCalls then.
	warnedAt, warnedCalls atomic.Int64
	// now is the clock of warnedAt (nil: time.Now).
	now func() time.Time
}

// LeftOutWarnEvery is how often at most a compaction layer warns of dropped
// messages left out of the summary; it logs the others at debug level.
const LeftOutWarnEvery = time.Minute

// LeftOutCount counts the dropped messages a layer left out of its summaries.
type LeftOutCount struct {
	// Calls counts the summary calls that left messages out.
	Calls int64
	// Messages counts the messages they left out.
	Messages int64
}

// LeftOut returns how many dropped messages the layer left out of its
// summaries since it was built, and in how many summary calls: those its
// summary model's window (or a max_tokens layer inside, or
// DefaultSummaryInput) could not hold, dropped without being summarized.
func (m *Middleware) LeftOut() LeftOutCount {
	return LeftOutCount{Calls: m.leftCalls.Load(), Messages: m.leftMsgs.Load()}
}

// noteLeftOut counts the left of n messages a summary call left out, and
// says so: a warning at most once each LeftOutWarnEvery (naming the calls
// since that it did not warn about), a debug line otherwise, so that a
// server whose every long request leaves messages out does not repeat the
// warning on each.
func (m *Middleware) noteLeftOut(ctx context.Context, left, n, room int) {
	calls := m.leftCalls.Add(1)
	m.leftMsgs.Add(int64(left))
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	t := now().UnixNano()
	last := m.warnedAt.Load()
	args := []any{"left_out", left, "of", n, "context_tokens", m.window, "max_tokens_inside", m.inputCap, "read_tokens", room}
	if (last == 0 || t-last >= int64(LeftOutWarnEvery)) && m.warnedAt.CompareAndSwap(last, t) {
		m.logger.WarnContext(ctx, "dropped messages left out of the summary", append(args,
			"not_warned", calls-m.warnedCalls.Swap(calls)-1, "warned_every", LeftOutWarnEvery.String(),
			"hint", fmt.Sprintf("the summary model reads the earliest dropped messages its window holds (%d tokens of text when it declares no context_tokens): a model with a larger context_tokens (or a higher max_tokens limit inside) summarizes more", DefaultSummaryInput))...)
		return
	}
	m.logger.DebugContext(ctx, "dropped messages left out of the summary", args...)
}

// Provision resolves the summary model.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	m.effects = func(tool string) bool {
		t, ok := b.Tool(tool)
		return ok && t.SideEffecting
	}
	if m.Strategy == StrategySummarize {
		if m.Model == "" {
			return errors.New(`model is required with strategy "summarize"`)
		}
		c, ok := b.Models()[m.Model]
		if !ok || c == nil {
			return fmt.Errorf("model %q has no client (Deps.Models)", m.Model)
		}
		m.client = c
		if b.Plan != nil {
			m.window = b.Plan.Models[m.Model].ContextTokens
			if b.Stage == rplan.StageChat && b.Index < len(b.Plan.Chains.Chat) {
				m.inputCap = inputCap(b.Plan.Chains.Chat[b.Index+1:])
			}
		}
		for _, l := range b.Outer() {
			if s, ok := l.Middleware.(runtime.GroundingScreener); ok {
				m.screens = append(m.screens, screen{name: l.Name, s: s})
			}
		}
	}
	return nil
}

// screen is a layer outside compaction that screens text, and its name.
type screen struct {
	name string
	s    runtime.GroundingScreener
}

// flagged is the error of a summary a layer outside compaction flagged.
// With block set the call is blocked (the layer's grounding policy is to
// block); otherwise the summary is dropped and the layer falls back to
// keep_recent.
type flagged struct {
	err   *runtime.BlockedError
	block bool
}

func (f *flagged) Error() string { return f.err.Error() }
func (f *flagged) Unwrap() error { return f.err }

// screenSummary has the layers outside compaction that screen text read the
// summary (whatever their when, as for grounding): they read the call
// before compaction wrote it, and would never read it otherwise. One that
// reads a summary as it reads the transcript's messages
// (runtime.SummaryScreener: security, which read the transcript raw, its
// tool results as documents) does so; the others read it as a grounding
// item. The first that flags it decides, by its grounding setting, whether
// the call is blocked or the summary dropped.
func (m *Middleware) screenSummary(ctx context.Context, text string) error {
	for _, s := range m.screens {
		read := s.s.ScreenGrounding
		if ss, ok := s.s.(runtime.SummaryScreener); ok {
			read = ss.ScreenSummary
		}
		if found, drop := read(ctx, text); found != "" {
			return &flagged{err: &runtime.BlockedError{Layer: s.name, Message: "the summary " + m.name + " wrote: " + found}, block: !drop}
		}
	}
	return nil
}

// Validate checks the strategy and bounds.
func (m *Middleware) Validate() error {
	switch {
	case m.Strategy != StrategyKeepRecent && m.Strategy != StrategySummarize && m.Strategy != StrategyImportance:
		return fmt.Errorf(`strategy must be "keep_recent", "summarize" or "importance", got %q`, m.Strategy)
	case m.SummaryTimeout <= 0:
		return fmt.Errorf("summary_timeout must be positive, got %s", m.SummaryTimeout.D())
	case m.MaxMessages < 0:
		return fmt.Errorf("max_messages must not be negative, got %d", m.MaxMessages)
	case m.MaxTokens < 1:
		return fmt.Errorf("max_tokens must be at least 1, got %d", m.MaxTokens)
	case m.KeepRecent < 1:
		return fmt.Errorf("keep_recent must be at least 1, got %d", m.KeepRecent)
	case m.MaxMessages > 0 && m.MaxMessages < m.KeepRecent:
		return fmt.Errorf("max_messages %d is below keep_recent %d: the keep_recent most recent messages are always kept, so a longer transcript keeps more; lower keep_recent or raise max_messages", m.MaxMessages, m.KeepRecent)
	}
	return nil
}

// syntheticID prefixes the tool-call ids the layer makes up for tool
// messages of legacy transcripts (see toLocal).
const syntheticID = "\x00compaction:"

// toLocal converts a runtime transcript into the units compaction keeps
// together. A "developer" message, which both providers send as a system
// message, is one here too. An assistant message's tool calls are linked to
// their results by id: a tool message whose ToolCallID or one of whose
// tool_result parts names a call, and a message whose tool_result parts name
// one. A tool message that names no declared call
// belongs to the nearest assistant message before it when that message
// declares no tool calls (a transcript written before assistant messages
// carried their calls); otherwise it is an orphan, and dropped. An
// assistant message calling a tool for which effects reports true is pinned
// with its results: a model that no longer saw that a refund was made could
// propose it again. Each local message remembers its runtime message, which
// toRuntime returns as it was.
func toLocal(msgs []runtime.Message, effects func(string) bool) []Message {
	out := make([]Message, len(msgs))
	declared := map[string]bool{}
	last := -1
	for i := range msgs {
		m := &msgs[i]
		out[i] = Message{Role: m.Role, Content: messageText(m), ToolCallID: m.ToolCallID, Name: m.Name, src: i + 1,
			Pinned: m.Metadata[PinKey] == "true", Summary: isSummary(m)}
		if m.Role == roleDeveloper {
			out[i].Role = RoleSystem
		}
		for _, p := range m.Parts {
			if p.Type == runtime.PartToolResult {
				out[i].ToolResultIDs = append(out[i].ToolResultIDs, p.ToolCallID)
			}
		}
		switch m.Role {
		case RoleAssistant:
			last = i
			for _, tc := range m.ToolCalls {
				out[i].ToolCalls = append(out[i].ToolCalls, ToolCall{ID: tc.ID, Name: tc.Name, Args: string(tc.Arguments)})
				declared[tc.ID] = true
				if effects != nil && effects(tc.Name) {
					out[i].Pinned = true
				}
			}
		case RoleTool:
			if m.ToolCallID != "" && declared[m.ToolCallID] {
				continue
			}
			if id, ok := firstDeclared(out[i].ToolResultIDs, declared); ok {
				out[i].ToolCallID = id // its result rides in a part
				continue
			}
			if last < 0 || len(msgs[last].ToolCalls) > 0 {
				out[i].ToolCallID = "" // orphan
				continue
			}
			id := fmt.Sprintf("%s%d", syntheticID, i)
			out[i].ToolCallID = id
			out[last].ToolCalls = append(out[last].ToolCalls, ToolCall{ID: id})
		}
	}
	return out
}

// roleDeveloper is OpenAI's name for the system role of its newer models.
const roleDeveloper = "developer"

// firstDeclared returns the first of ids that declared holds.
func firstDeclared(ids []string, declared map[string]bool) (string, bool) {
	for _, id := range ids {
		if id != "" && declared[id] {
			return id, true
		}
	}
	return "", false
}

// messageText is the text of a message for the summary: its content, its
// text and tool-result parts, and its tool calls.
func messageText(m *runtime.Message) string {
	if len(m.Parts) == 0 && len(m.ToolCalls) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	add := func(s string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	for _, p := range m.Parts {
		switch p.Type {
		case runtime.PartText:
			add(p.Text)
		case runtime.PartToolResult:
			add("[tool result " + p.ToolCallID + "] " + p.Text)
		case runtime.PartImage:
			add("[image]")
		}
	}
	for _, tc := range m.ToolCalls {
		add("[tool call " + tc.Name + " " + string(tc.Arguments) + "]")
	}
	return b.String()
}

// toRuntime returns the runtime messages of msgs: the original of each
// converted message, a new one for a summary.
func toRuntime(orig []runtime.Message, msgs []Message) []runtime.Message {
	out := make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		if m.src > 0 {
			out[i] = orig[m.src-1]
			continue
		}
		out[i] = runtime.Message{Role: m.Role, Content: m.Content, Name: m.Name}
		if m.Summary {
			// No operator wrote the summary: the summary model did, from
			// what users and tools wrote. Marked as retrieved text and as a
			// summary, it is read by the detectors (security, pii,
			// content_filter) whatever their system setting, as the
			// transcript's messages are.
			out[i].Metadata = map[string]string{SummaryKey: "true", runtime.GroundingKey: "true"}
		}
	}
	return out
}

// isSummary reports whether m is a summary the layer wrote (SummaryKey).
func isSummary(m *runtime.Message) bool {
	return m.Role == RoleSystem && m.Metadata[SummaryKey] == "true"
}

// counter counts a message the way runtime.EstimateMessages does: the
// original runtime message of a converted one, parts and tool calls
// included.
func counter(orig []runtime.Message) TokenCounter {
	return func(m Message) int {
		if m.src > 0 {
			return int(runtime.EstimateMessages(orig[m.src-1 : m.src]))
		}
		return int(runtime.EstimateTokens(m.Content)) + 4
	}
}

// Compact returns the compacted transcript of msgs and whether it differs
// from msgs: a transcript over the budget of which nothing may be dropped
// (a system prompt and one huge request) is returned as it is, unchanged.
// msgs is not modified. A summary a layer outside compaction flags is
// dropped, as a failed one is (the call itself, in a pipeline, is blocked
// when the layer's grounding setting says so). When ctx ends before the
// work is done, or msgs holds no message to send but tool results that
// answer no call (and system messages), msgs is returned as it is.
func (m *Middleware) Compact(ctx context.Context, msgs []runtime.Message) ([]runtime.Message, bool) {
	out, changed, err := m.compact(ctx, msgs, false)
	if err != nil {
		// ctx ended, or the transcript holds nothing to send: it is
		// returned as it is.
		return msgs, false
	}
	return out, changed
}

// compact is Compact; with block, a summary a layer outside flags with a
// grounding setting of "block" returns that layer's *runtime.BlockedError
// and no transcript.
func (m *Middleware) compact(ctx context.Context, msgs []runtime.Message, block bool) ([]runtime.Message, bool, error) {
	if int(runtime.EstimateMessages(msgs)) <= m.MaxTokens && (m.MaxMessages <= 0 || len(msgs) <= m.MaxMessages) && !hasOrphan(msgs) {
		return msgs, false, nil
	}
	local := toLocal(msgs, m.effects)
	o := Options{MaxTokens: m.MaxTokens, MaxMessages: m.MaxMessages, KeepRecent: m.KeepRecent,
		KeepFirstUserTurn: m.KeepFirstUserTurn, Count: counter(msgs)}
	var out []Message
	switch m.Strategy {
	case StrategySummarize:
		// One deadline bounds every summary call of this call: a summary
		// that does not fit has the model called again, within the time
		// the first call left.
		sctx, cancel := context.WithTimeout(ctx, m.SummaryTimeout.D())
		var err error
		out, err = SummarizeWith(ctx, local, o, func(_ context.Context, msgs []Message) (string, error) {
			return m.summarize(ctx, sctx, msgs)
		})
		cancel()
		var f *flagged
		switch {
		case err != nil && ctx.Err() != nil:
			// The caller has gone (a client that hung up): no summary
			// failed, and nothing is left to compact for.
			m.logger.DebugContext(ctx, "summary abandoned: the call ended", "error", ctx.Err())
			return nil, false, ctx.Err()
		case errors.As(err, &f) && f.block && block:
			return nil, false, f.err
		case f != nil:
			m.logger.WarnContext(ctx, "summary flagged; keeping recent messages", "layer", m.name, "by", f.err.Layer, "found", f.err.Message)
			out = nil
		case err != nil:
			m.logger.WarnContext(ctx, "summary failed; keeping recent messages", "layer", m.name, "error", err)
			out = nil
		}
	case StrategyImportance:
		var err error
		if out, err = ImportanceContext(ctx, local, o); err != nil {
			return nil, false, err
		}
	}
	if out == nil {
		var err error
		if out, err = CompactContext(ctx, local, o); err != nil {
			return nil, false, err
		}
	}
	if unchanged(out, len(msgs)) {
		// Over the budget, but nothing may be dropped: sent as it is.
		return msgs, false, nil
	}
	if !conversing(out) {
		// No Layer: a 400 of the request itself, as a provider's, which
		// agentc serve answers with a 400 its client does not retry.
		return nil, false, &runtime.CallError{Kind: runtime.KindPermanent, Status: http.StatusBadRequest,
			Message: fmt.Sprintf(m.name+": the transcript holds no message to send: its %d tool results answer no tool call in it, and providers refuse such results", len(msgs)-len(out))}
	}
	return toRuntime(msgs, out), true, nil
}

// conversing reports whether msgs holds a message besides system messages:
// a transcript without one is refused by both providers.
func conversing(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role != RoleSystem {
			return true
		}
	}
	return false
}

// unchanged reports whether out holds each of the n converted messages, in
// order, and nothing else.
func unchanged(out []Message, n int) bool {
	if len(out) != n {
		return false
	}
	for i, m := range out {
		if m.src != i+1 {
			return false
		}
	}
	return true
}

// hasOrphan reports a tool message that toLocal would drop: one that names
// no call declared before it (by its ToolCallID or a tool_result part),
// while its nearest assistant message declares calls (or there is none).
func hasOrphan(msgs []runtime.Message) bool {
	last := -1
	declared := map[string]bool{} // the ids of the calls declared so far
	for i := range msgs {
		switch msgs[i].Role {
		case RoleAssistant:
			last = i
		case RoleTool:
			if last < 0 || len(msgs[last].ToolCalls) > 0 && !answersDeclared(&msgs[i], declared) {
				return true
			}
		}
		for _, tc := range msgs[i].ToolCalls {
			if tc.ID != "" {
				declared[tc.ID] = true
			}
		}
	}
	return false
}

// answersDeclared reports whether the tool message m answers a call that
// declared holds, by its ToolCallID or a tool_result part.
func answersDeclared(m *runtime.Message, declared map[string]bool) bool {
	if declared[m.ToolCallID] {
		return true
	}
	for _, p := range m.Parts {
		if p.Type == runtime.PartToolResult && declared[p.ToolCallID] {
			return true
		}
	}
	return false
}

// belowKey carries, on the context of Compact, the chain below the layer and
// the call being compacted (see WrapChat).
type belowKey struct{}

type below struct {
	next   runtime.ChatHandler
	parent *runtime.ChatCall
}

// inputCap returns the smallest limit of the max_tokens layers of inner
// without a when (0: none): a summary request over it would be refused.
func inputCap(inner []rplan.Layer) int {
	limit := 0
	for _, l := range inner {
		if l.Use != "max_tokens" || l.When != nil {
			continue
		}
		var c struct {
			Limit int `json:"limit"`
		}
		if json.Unmarshal(l.Config, &c) == nil && c.Limit > 0 && (limit == 0 || c.Limit < limit) {
			limit = c.Limit
		}
	}
	return limit
}

// DefaultSummaryInput bounds the tokens of text the summary model reads when
// it declares no context_tokens and no max_tokens layer inside the
// compaction bounds the summary call: the earliest dropped messages that
// fit are summarized, the later ones dropped without being summarized.
// Most models' windows hold it; a model that declares its context_tokens
// reads what that window holds instead.
const DefaultSummaryInput = 32000

// DefaultSummaryTimeout is the default summary_timeout.
const DefaultSummaryTimeout = 30 * time.Second

// summarize asks the summary model for a summary of msgs: through the chat
// chain below the layer when Compact runs inside WrapChat, else through the
// summary model's client directly. The call is bounded: it asks for at most
// what the summary could be and still be kept (the budget, and no more than
// the messages it replaces), stops reading a summary past that (and refuses
// it, ErrSummaryTooLong), is given up when sctx ends (the SummaryTimeout
// of the whole summarizing of the call ctx compacts, every summary call
// included; ctx is the call's own), and sends no more than the summary
// model's declared context window holds besides the summary, nor than a
// max_tokens layer inside lets through, and with neither no more than
// DefaultSummaryInput tokens of text (see summaryText).
func (m *Middleware) summarize(ctx, sctx context.Context, msgs []Message) (string, error) {
	timedOut := func(err error) error {
		return fmt.Errorf("no summary within %s (summary_timeout): %w", m.SummaryTimeout.D(), err)
	}
	if err := sctx.Err(); err != nil && ctx.Err() == nil {
		// An earlier summary call of this call took the time.
		return "", timedOut(err)
	}
	replaced := 0
	for _, msg := range msgs {
		replaced += int(runtime.EstimateTokens(msg.Content)) + 4
	}
	limit := max(1, min(m.MaxTokens, replaced))
	room := 0 // tokens of text the window holds (0: no window)
	prompt := []runtime.Message{{Role: RoleSystem, Content: SummaryPrompt}, {Role: RoleUser}}
	if m.window > 0 {
		limit = max(1, min(limit, m.window/2))
		if room = m.window - limit - int(runtime.EstimateMessages(prompt)); room <= 0 {
			return "", fmt.Errorf("the context window of %s (context_tokens %d) holds no text to summarize", m.Model, m.window)
		}
	}
	if m.inputCap > 0 {
		// A max_tokens layer inside reads the request's input only.
		capped := m.inputCap - int(runtime.EstimateRequest(&runtime.ChatRequest{Model: m.Model, Messages: prompt}))
		if capped <= 0 {
			return "", fmt.Errorf("the limit of the max_tokens layer inside (%d) holds no text to summarize", m.inputCap)
		}
		if room == 0 || capped < room {
			room = capped
		}
	}
	if room == 0 {
		// No window declared, nor a limit inside: the summary model reads
		// no more than DefaultSummaryInput, however long the dropped
		// prefix (a transcript of megabytes).
		room = DefaultSummaryInput
	}
	var left int
	prompt[1].Content, left = summaryText(msgs, room)
	if left > 0 {
		// What the window leaves out is dropped all the same: say so.
		m.noteLeftOut(ctx, left, len(msgs), room)
	}
	req := &runtime.ChatRequest{Model: m.Model, Messages: prompt, MaxTokens: limit}
	var out strings.Builder
	// read bounds the tokens of the summary so far: the estimate of the
	// text as last counted whole, plus that of each delta since. A delta
	// counted on its own is rounded up and begins a word (" the" costs
	// two tokens, a third more than in the text), so past limit the text
	// is counted again whole: each count leaves the deltas less room, the
	// share they overcount taken off, so it is counted a few times.
	read, over := 0, false
	collect := func(d runtime.Delta) bool {
		out.WriteString(d.Text)
		if read += int(runtime.EstimateTokens(d.Text)); read > limit {
			if read = int(runtime.EstimateTokens(out.String())); read > limit {
				over = true
				return false
			}
		}
		return true
	}
	var err error
	if b, ok := ctx.Value(belowKey{}).(below); ok {
		err = b.next(sctx, runtime.OwnCall(b.parent, *req), collect)
	} else {
		err = m.client.Stream(sctx, req, collect)
	}
	switch {
	case over:
		return "", fmt.Errorf("%w: the summary model wrote past the %d tokens asked for", ErrSummaryTooLong, limit)
	case err != nil && ctx.Err() == nil && sctx.Err() != nil:
		return "", timedOut(err)
	case err != nil:
		return "", err
	}
	if err := m.screenSummary(ctx, out.String()); err != nil {
		return "", err
	}
	return out.String(), nil
}

// summaryText is the text of msgs the summary model reads, one message a
// line, and the number of messages it leaves out. With room > 0 it holds at
// most room tokens: the messages in order (an earlier summary first) while
// they fit, the first cut to fit when even it does not; the later ones are
// left out, dropped without being summarized.
func summaryText(msgs []Message, room int) (string, int) {
	var b strings.Builder
	used := 0
	for k, msg := range msgs {
		line := msg.Role
		if msg.Name != "" && !IsSummary(msg) {
			line += " (" + msg.Name + ")"
		}
		line += ": " + msg.Content + "\n"
		if room > 0 {
			n := int(runtime.EstimateTokens(line))
			if used+n > room {
				if used == 0 {
					b.WriteString(cutTo(line, room))
					k++
				}
				return b.String(), len(msgs) - k
			}
			used += n
		}
		b.WriteString(line)
	}
	return b.String(), 0
}

// cutTo returns the longest prefix of s, cut at a rune boundary, that
// costs at most n tokens.
func cutTo(s string, n int) string {
	lo, hi := 0, len(s) // the prefix of lo bytes fits; of hi+1 does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if runtime.EstimateTokens(s[:mid]) <= int64(n) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for lo > 0 && lo < len(s) && !utf8.RuneStart(s[lo]) {
		lo--
	}
	return s[:lo]
}

// Compacted is what the layer records on the response (ChatResponse.
// Annotations, under the layer's name) when it changed the transcript: the
// transcript the model was sent, so that the host can continue from it and a
// summary is paid for once rather than on every call over the budget.
type Compacted struct {
	// Messages is the compacted transcript, as sent on.
	Messages []runtime.Message `json:"messages"`
	// Dropped counts the messages removed (a summary replacing messages
	// counts them all).
	Dropped int `json:"dropped"`
}

// CompactedOf returns the compacted transcript the compaction layer named
// layer recorded on resp, if it changed the transcript.
func CompactedOf(resp runtime.ChatResponse, layer string) (Compacted, bool) {
	c, ok := resp.Annotations[layer].(Compacted)
	return c, ok
}

// summaries counts the summary messages of msgs.
func summaries(msgs []runtime.Message) int {
	n := 0
	for i := range msgs {
		if isSummary(&msgs[i]) {
			n++
		}
	}
	return n
}

// WrapChat implements runtime.ChatWrapper: the call's transcript is compacted
// before the inner layers run and restored on the call once they return; the
// compacted transcript is recorded on the response (Compacted).
func (m *Middleware) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		orig := c.Request.Messages
		cctx := ctx
		if m.Strategy == StrategySummarize {
			cctx = context.WithValue(ctx, belowKey{}, below{next, c})
		}
		out, changed, err := m.compact(cctx, orig, true)
		if err != nil {
			return err
		}
		if !changed {
			return next(ctx, c, yield)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Request.Messages = out
		err = next(ctx, c, yield)
		c.Request.Messages = orig
		c.Annotate(m.name, Compacted{Messages: out, Dropped: len(orig) - len(out) + summaries(out) - summaries(orig)})
		return err
	}
}

var _ runtime.ChatWrapper = (*Middleware)(nil)
