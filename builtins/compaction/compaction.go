package compaction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ToolCall is one tool invocation requested by an assistant message.
type ToolCall struct {
	ID   string
	Name string
	Args string // JSON text
}

// Message is one transcript entry.
type Message struct {
	Role    string
	Content string
	// ToolCallID links a tool-role message to the ToolCall it answers.
	ToolCallID string
	// ToolCalls are the calls an assistant message requests.
	ToolCalls []ToolCall
	// Name is the participant or tool name; SummaryName marks a summary written by Summarize.
	Name string
	// ToolResultIDs are the ids of the tool calls a non-tool message answers with tool-result
	// parts (a user message carrying tool results, as Anthropic's API shapes them). The message
	// stays with the assistant message that requested the first of them.
	ToolResultIDs []string

	// src is the index + 1 of the runtime message this one was converted from (0: none).
	src int
}

// TokenCounter returns the number of tokens a message costs in the model's context.
type TokenCounter func(Message) int

// Token estimate parameters used by EstimateTokens.
const (
	BytesPerToken    = 4 // bytes of text per token
	MessageOverhead  = 4 // tokens per message for role and framing
	ToolCallOverhead = 3 // tokens per tool call for framing
)

// EstimateTokens estimates the tokens of m without a tokenizer: one token per BytesPerToken
// bytes (rounded up) of its content, name and tool-call id, plus MessageOverhead per message,
// plus, for each tool call, ToolCallOverhead and one token per BytesPerToken bytes of its id,
// name and arguments. English text averages about four bytes per token with common
// tokenizers; the estimate is cheap, deterministic and errs high for code and JSON.
func EstimateTokens(m Message) int {
	n := MessageOverhead + ceilDiv(len(m.Content)+len(m.Name)+len(m.ToolCallID), BytesPerToken)
	for _, tc := range m.ToolCalls {
		n += ToolCallOverhead + ceilDiv(len(tc.ID)+len(tc.Name)+len(tc.Args), BytesPerToken)
	}
	return n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Summary marking.
const (
	// SummaryName is the Name of the system message that Summarize inserts.
	SummaryName = "compaction_summary"
	// SummaryPrefix starts the Content of that message.
	SummaryPrefix = "Summary of earlier conversation: "
)

// IsSummary reports whether m is a summary inserted by Summarize.
func IsSummary(m Message) bool {
	return m.Role == RoleSystem && m.Name == SummaryName
}

// KeepRecent compacts msgs to fit maxTokens. System messages are always kept, and so are the
// keepRecent most recent other messages (together with the rest of their tool-call units).
// Older units are dropped, oldest first, only while the total is over maxTokens; the result
// can therefore stay over budget when the protected messages alone exceed it. Orphaned tool
// results are always dropped. maxTokens <= 0 means no budget (only orphans are removed). A nil
// count means EstimateTokens. msgs is not modified; the result is a new slice.
func KeepRecent(msgs []Message, maxTokens, keepRecent int, count TokenCounter) []Message {
	p := newPlan(msgs, keepRecent, count, false)
	p.dropWhileOver(maxTokens, 0)
	return p.output(nil)
}

// Summarizer writes a summary of msgs, which are the messages being dropped, in transcript
// order, preceded by any earlier summary. It should honour ctx.
type Summarizer func(ctx context.Context, msgs []Message) (string, error)

// ErrEmptySummary is returned when the Summarizer returns only whitespace.
var ErrEmptySummary = errors.New("compaction: summarizer returned an empty summary")

// Summarize compacts msgs like KeepRecent but replaces the dropped messages with one system
// message (Name SummaryName, Content SummaryPrefix + summary) at the place of the first
// message it replaces. An earlier summary is handed to summarize with the dropped messages
// and replaced, so a transcript never holds more than one. The summary's own tokens count
// toward maxTokens: when it does not fit, more units are dropped and summarize is called
// again, until the transcript fits or nothing more may be dropped. When nothing needs to be
// dropped, summarize is not called and the result equals KeepRecent's (so a second run on the
// output changes nothing). On a summarizer error or ErrEmptySummary no transcript is returned;
// callers may fall back to KeepRecent.
func Summarize(ctx context.Context, msgs []Message, maxTokens, keepRecent int, count TokenCounter, summarize Summarizer) ([]Message, error) {
	if summarize == nil {
		return nil, errors.New("compaction: nil summarizer")
	}
	p := newPlan(msgs, keepRecent, count, true)
	old := 0 // tokens of earlier summaries
	for _, i := range p.summaries {
		old += p.tokens[i]
	}
	// Reserve room for the new summary: at least what an empty one costs.
	reserve := max(old, p.count(Message{Role: RoleSystem, Name: SummaryName, Content: SummaryPrefix}))
	if maxTokens <= 0 || p.total+old <= maxTokens || !p.dropWhileOver(maxTokens, reserve) {
		// Within budget, or nothing may be dropped: earlier summaries stay as they are.
		p.keepSummaries()
		return p.output(nil), nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text, err := summarize(ctx, p.summaryInput())
		if err != nil {
			return nil, fmt.Errorf("compaction: summarize: %w", err)
		}
		text = strings.TrimSpace(text)
		if text == "" {
			return nil, ErrEmptySummary
		}
		summary := Message{Role: RoleSystem, Name: SummaryName, Content: SummaryPrefix + text}
		if !p.dropWhileOver(maxTokens, p.count(summary)) {
			return p.output(&summary), nil
		}
	}
}

// plan holds the analysis of one transcript and the drop decisions made on it.
type plan struct {
	msgs      []Message
	count     TokenCounter
	tokens    []int
	keep      []bool
	unitOf    []int  // message -> its unit, -1 for system messages, summaries and orphans
	units     []unit // units in order of their first message
	next      int    // index in units of the next unit to consider dropping
	total     int    // tokens of the kept messages
	summaries []int  // indices of earlier summaries (Summarize only); not in total
}

// unit is an assistant message with its tool results, or any other single message.
type unit struct {
	idx       []int
	protected bool
}

func newPlan(msgs []Message, keepRecent int, count TokenCounter, splitSummaries bool) *plan {
	if count == nil {
		count = EstimateTokens
	}
	p := &plan{msgs: msgs, count: count, tokens: make([]int, len(msgs)), keep: make([]bool, len(msgs)), unitOf: make([]int, len(msgs))}
	unitOf := p.unitOf
	callUnit := map[string]int{} // tool call id -> unit of its nearest declaration so far
	var conversation []int       // non-system, non-orphan messages in order
	for i, m := range msgs {
		unitOf[i] = -1
		switch {
		case m.Role == RoleSystem:
			if splitSummaries && IsSummary(m) {
				p.summaries = append(p.summaries, i)
				p.tokens[i] = count(m)
				continue
			}
		case m.Role == RoleTool:
			u, ok := callUnit[m.ToolCallID]
			if !ok || m.ToolCallID == "" {
				continue // orphan: dropped
			}
			p.units[u].idx = append(p.units[u].idx, i)
			unitOf[i] = u
			conversation = append(conversation, i)
		default:
			if u, ok := answeredUnit(callUnit, m.ToolResultIDs); ok {
				p.units[u].idx = append(p.units[u].idx, i)
				unitOf[i] = u
				conversation = append(conversation, i)
				break
			}
			unitOf[i] = len(p.units)
			p.units = append(p.units, unit{idx: []int{i}})
			for _, tc := range m.ToolCalls {
				callUnit[tc.ID] = unitOf[i]
			}
			conversation = append(conversation, i)
		}
		p.keep[i] = true
		p.tokens[i] = count(m)
		p.total += p.tokens[i]
	}
	for _, i := range conversation[max(0, len(conversation)-keepRecent):] {
		p.units[unitOf[i]].protected = true
	}
	return p
}

// answeredUnit returns the unit of the first declared call among ids.
func answeredUnit(callUnit map[string]int, ids []string) (int, bool) {
	for _, id := range ids {
		if u, ok := callUnit[id]; ok && id != "" {
			return u, true
		}
	}
	return 0, false
}

// dropWhileOver drops unprotected units, oldest first, while the kept messages plus reserve
// tokens exceed maxTokens. It reports whether this call dropped any unit.
func (p *plan) dropWhileOver(maxTokens, reserve int) bool {
	dropped := false
	for maxTokens > 0 && p.total+reserve > maxTokens && p.next < len(p.units) {
		u := p.units[p.next]
		p.next++
		if u.protected {
			continue
		}
		for _, i := range u.idx {
			p.keep[i] = false
			p.total -= p.tokens[i]
		}
		dropped = true
	}
	return dropped
}

func (p *plan) keepSummaries() {
	for _, i := range p.summaries {
		p.keep[i] = true
	}
}

// summaryInput is what the summarizer sees: earlier summaries and the dropped messages, in
// transcript order, as copies.
func (p *plan) summaryInput() []Message {
	var in []Message
	for i, m := range p.msgs {
		if p.isSummary(i) || (!p.keep[i] && p.inUnit(i)) {
			in = append(in, clone(m))
		}
	}
	return in
}

func (p *plan) isSummary(i int) bool { return slices.Contains(p.summaries, i) }

// inUnit reports whether message i belongs to a unit: it is neither a system message nor an
// orphan.
func (p *plan) inUnit(i int) bool { return p.unitOf[i] >= 0 }

// output builds the compacted transcript; summary, when given, takes the place of the first
// replaced message (an earlier summary or a dropped message).
func (p *plan) output(summary *Message) []Message {
	out := make([]Message, 0, len(p.msgs)+1)
	for i, m := range p.msgs {
		if summary != nil && (p.isSummary(i) || (!p.keep[i] && p.inUnit(i))) {
			out = append(out, *summary)
			summary = nil
			continue
		}
		if p.keep[i] {
			out = append(out, clone(m))
		}
	}
	return out
}

func clone(m Message) Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.ToolResultIDs = slices.Clone(m.ToolResultIDs)
	return m
}
