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
	// Name is the participant or tool name (SummaryName on a summary written by Summarize).
	Name string
	// Summary marks a summary written by Summarize. Only such a message is taken as an
	// earlier summary, to be summarized again and replaced; a system message that merely
	// carries the name SummaryName is a system message like any other, and kept.
	Summary bool
	// ToolResultIDs are the ids of the tool calls a message answers with tool-result parts (a
	// user message carrying tool results, as Anthropic's API shapes them, or a tool message
	// without a ToolCallID of its own). The message stays with the assistant message that
	// requested the first of them.
	ToolResultIDs []string
	// Pinned messages are never dropped (with the rest of their tool-call unit).
	Pinned bool

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
	// SummaryName is the Name of the system message that Summarize inserts. It is
	// what the model sees; what marks the summary is Message.Summary.
	SummaryName = "compaction_summary"
	// SummaryPrefix starts the Content of that message.
	SummaryPrefix = "Summary of earlier conversation: "
)

// IsSummary reports whether m is a summary inserted by Summarize (Message.Summary).
func IsSummary(m Message) bool {
	return m.Role == RoleSystem && m.Summary
}

// KeepRecent compacts msgs to fit maxTokens. System messages are always kept, and so are the
// keepRecent most recent other messages (together with the rest of their tool-call units).
// Older units are dropped, oldest first, only while the total is over maxTokens (and then an
// assistant message the cut would leave first: see the package documentation); the result
// can therefore stay over budget when the protected messages alone exceed it. Orphaned tool
// results are always dropped. maxTokens <= 0 means no budget (only orphans are removed). A nil
// count means EstimateTokens. msgs is not modified; the result is a new slice.
func KeepRecent(msgs []Message, maxTokens, keepRecent int, count TokenCounter) []Message {
	return Compact(msgs, Options{MaxTokens: maxTokens, KeepRecent: keepRecent, Count: count})
}

// Options tune Compact and Importance.
type Options struct {
	// MaxTokens is the token budget (<= 0: none).
	MaxTokens int
	// MaxMessages bounds the number of kept messages, system messages
	// included (<= 0: none).
	MaxMessages int
	// KeepRecent most recent non-system messages are always kept.
	KeepRecent int
	// KeepFirstUserTurn always keeps the first user message (with its
	// tool-call unit). Importance always does.
	KeepFirstUserTurn bool
	// Count counts a message's tokens (nil: EstimateTokens).
	Count TokenCounter
}

// Compact is KeepRecent with every option: system messages, pinned messages,
// the KeepRecent most recent others and, with KeepFirstUserTurn, the first
// user message are kept; older units are dropped, oldest first, while the
// transcript is over MaxTokens or holds more than MaxMessages messages.
func Compact(msgs []Message, o Options) []Message {
	out, _ := CompactContext(context.Background(), msgs, o)
	return out
}

// CompactContext is Compact, stopped with ctx's error when ctx ends before
// it is done. Its time is linear in the size of msgs (up to the rounds in
// which a cut that would leave an answer without its question keeps the
// question again).
func CompactContext(ctx context.Context, msgs []Message, o Options) ([]Message, error) {
	p := newPlan(ctx, msgs, o, false)
	if p.err != nil {
		return nil, p.err
	}
	p.dropWhileOver(o.MaxTokens, 0)
	if p.err != nil {
		return nil, p.err
	}
	return p.output(nil), nil
}

// Importance compacts msgs by importance. Always kept: system messages, the
// first user message, pinned messages, the KeepRecent most recent others,
// and tool calls whose results a later message refers to (it names the
// call's id, or quotes the first line of a result, when that line has at
// least MinQuote bytes). The rest are dropped while the transcript is over
// MaxTokens or holds more than MaxMessages messages, the least important
// first: tool calls whose results nothing later refers to, oldest first,
// then the other messages, oldest first. Tool-call units stay whole; orphans
// are dropped; the result is idempotent.
func Importance(msgs []Message, o Options) []Message {
	out, _ := ImportanceContext(context.Background(), msgs, o)
	return out
}

// ImportanceContext is Importance, stopped with ctx's error when ctx ends
// before it is done.
func ImportanceContext(ctx context.Context, msgs []Message, o Options) ([]Message, error) {
	o.KeepFirstUserTurn = true
	p := newPlan(ctx, msgs, o, false)
	if p.err != nil {
		return nil, p.err
	}
	p.referenced()
	if p.err != nil {
		return nil, p.err
	}
	// Unreferenced tool-call units go first, then the rest, each oldest
	// first; protected units are skipped by dropWhileOver.
	p.order = p.order[:0]
	for ui, u := range p.units {
		if u.toolCalls && !u.protected {
			p.order = append(p.order, ui)
		}
	}
	for ui, u := range p.units {
		if !u.toolCalls || u.protected {
			p.order = append(p.order, ui)
		}
	}
	p.dropWhileOver(o.MaxTokens, 0)
	if p.err != nil {
		return nil, p.err
	}
	return p.output(nil), nil
}

// MinQuote is the shortest first line of a tool result that Importance
// looks for in later messages.
const MinQuote = 8

// referenced protects the tool-call units whose results a later message
// (outside the unit) refers to: by the call's id, or by quoting the first
// line of a result. Every needle is looked for at once (see quotes), in one
// scan of the transcript from its end: a needle's last occurrence is what
// decides, whether it follows the unit.
func (p *plan) referenced() {
	var q quotes
	type need struct{ unit, node, last int }
	var needs []need
	for ui := range p.units {
		u := &p.units[ui]
		if !u.toolCalls || u.protected {
			continue
		}
		last := u.idx[len(u.idx)-1]
		for _, i := range u.idx {
			if p.stopped() {
				return
			}
			m := p.msgs[i]
			for _, tc := range m.ToolCalls {
				if tc.ID != "" && !strings.HasPrefix(tc.ID, "\x00") {
					needs = append(needs, need{ui, q.add(tc.ID), last})
				}
			}
			if m.Role == RoleTool || len(m.ToolResultIDs) > 0 {
				line, _, _ := strings.Cut(strings.TrimSpace(m.Content), "\n")
				if line = strings.TrimSpace(line); len(line) >= MinQuote {
					needs = append(needs, need{ui, q.add(line), last})
				}
			}
		}
	}
	if len(needs) == 0 {
		return
	}
	q.link(p)
	for j := len(p.msgs) - 1; j >= 0 && p.err == nil; j-- {
		q.scan(p, p.msgs[j].Content, j)
	}
	p.steps += q.probes
	if p.err != nil {
		return
	}
	for _, n := range needs {
		if q.nodes[n.node].at-1 > n.last {
			p.units[n.unit].protected = true
		}
	}
}

// quotes finds which of a set of needles occur in texts (Aho-Corasick): a
// trie of the needles, each node linked to the longest proper suffix of its
// prefix that is in the trie (fail) and to the nearest needle among those
// suffixes (out). Scanning a text costs a step or so per byte and per needle
// found, and a needle's node records the index of the last text it was found
// in when the texts are scanned last first.
type quotes struct {
	nodes []quoteNode
	root  [256]int32 // the root's children (0: none)
	// wide holds the children of the nodes with more than fewKids, by
	// wideKey.
	wide map[int64]int32
	// probes counts the children of a list looked at to find one (see
	// plan.steps).
	probes int
}

type quoteNode struct {
	child, sibling int32 // first child; next child of the same parent
	fail, out      int32 // the suffix links; out -1: none
	b              byte
	end            bool   // a needle ends here
	kids           uint16 // the number of children (but the root's)
	// at + 1 is the index of the last text the needle ending here (or a
	// needle that is a suffix of it) was found in (0: none yet).
	at int
}

// add adds a needle and returns its node.
func (q *quotes) add(s string) int {
	if len(q.nodes) == 0 {
		q.nodes = append(q.nodes, quoteNode{out: -1})
	}
	n := int32(0)
	for i := range len(s) {
		n = q.childOrNew(n, s[i])
	}
	q.nodes[n].end = true
	return int(n)
}

// fewKids is the most children a node's list holds: the children of a
// node with more are found in quotes.wide, so that finding one costs a
// step or so however many needles go on from the same prefix.
const fewKids = 4

func (q *quotes) child(n int32, b byte) int32 {
	if n == 0 {
		return q.root[b]
	}
	if q.nodes[n].kids > fewKids {
		return q.wide[wideKey(n, b)]
	}
	for c := q.nodes[n].child; c != 0; c = q.nodes[c].sibling {
		q.probes++
		if q.nodes[c].b == b {
			return c
		}
	}
	return 0
}

func wideKey(n int32, b byte) int64 { return int64(n)<<8 | int64(b) }

func (q *quotes) childOrNew(n int32, b byte) int32 {
	if c := q.child(n, b); c != 0 {
		return c
	}
	c := int32(len(q.nodes))
	q.nodes = append(q.nodes, quoteNode{b: b, sibling: q.nodes[n].child, out: -1})
	q.nodes[n].child = c
	if n == 0 {
		q.root[b] = c
		return c
	}
	switch q.nodes[n].kids++; {
	case q.nodes[n].kids == fewKids+1:
		if q.wide == nil {
			q.wide = map[int64]int32{}
		}
		for k := c; k != 0; k = q.nodes[k].sibling {
			q.wide[wideKey(n, q.nodes[k].b)] = k
		}
	case q.nodes[n].kids > fewKids+1:
		q.wide[wideKey(n, b)] = c
	}
	return c
}

// link sets the suffix links, breadth first.
func (q *quotes) link(p *plan) {
	queue := make([]int32, 0, len(q.nodes))
	for c := q.nodes[0].child; c != 0; c = q.nodes[c].sibling {
		queue = append(queue, c)
	}
	for len(queue) > 0 && !p.stopped() {
		n := queue[0]
		queue = queue[1:]
		for c := q.nodes[n].child; c != 0; c = q.nodes[c].sibling {
			f := q.nodes[n].fail
			for f != 0 && q.child(f, q.nodes[c].b) == 0 {
				p.steps++
				f = q.nodes[f].fail
			}
			f = q.child(f, q.nodes[c].b)
			q.nodes[c].fail = f
			if q.nodes[f].end {
				q.nodes[c].out = f
			} else {
				q.nodes[c].out = q.nodes[f].out
			}
			queue = append(queue, c)
		}
	}
}

// scan records text j on the needles text holds that no text scanned
// before holds: texts are scanned last first, so a needle's record is the
// last text it occurs in.
func (q *quotes) scan(p *plan, text string, j int) {
	n := int32(0)
	for i := range len(text) {
		if p.stopped() {
			return
		}
		b := text[i]
		for n != 0 && q.child(n, b) == 0 {
			p.steps++
			n = q.nodes[n].fail
		}
		n = q.child(n, b)
		hit := n
		if !q.nodes[hit].end {
			hit = q.nodes[hit].out
		}
		// A needle already recorded had the needles it ends with recorded
		// with it.
		for hit > 0 && q.nodes[hit].at == 0 {
			p.steps++
			q.nodes[hit].at = j + 1
			hit = q.nodes[hit].out
		}
	}
}

// Summarizer writes a summary of msgs, which are the messages being dropped, in transcript
// order, preceded by any earlier summary. It should honour ctx.
type Summarizer func(ctx context.Context, msgs []Message) (string, error)

// ErrEmptySummary is returned when the Summarizer returns only whitespace.
var ErrEmptySummary = errors.New("compaction: summarizer returned an empty summary")

// ErrSummaryTooLong is returned when the summary does not fit the budget once every message
// that may be dropped is, while the transcript would fit without it, or when it costs more
// tokens than the messages it replaces.
var ErrSummaryTooLong = errors.New("compaction: the summary does not fit the budget")

// Summarize compacts msgs like KeepRecent but replaces the dropped messages with one system
// message (Name SummaryName, Content SummaryPrefix + summary, Summary set) at the place of the first
// message it replaces. An earlier summary is handed to summarize with the dropped messages
// and replaced, so a transcript never holds more than one. The summary's own tokens count
// toward maxTokens: when it does not fit, more units are dropped and summarize is called
// again, until the transcript fits or nothing more may be dropped. When nothing needs to be
// dropped, summarize is not called and the result equals KeepRecent's (so a second run on the
// output changes nothing). A summary that still does not fit once nothing more may be dropped
// is refused with ErrSummaryTooLong when the transcript would fit without it, or when it costs
// more than the messages it replaces (a summary longer than what it summarizes, as a model
// that runs on or repeats its input writes): the budget is not exceeded for it. On a
// summarizer error, ErrEmptySummary or ErrSummaryTooLong no transcript is returned; callers
// may fall back to KeepRecent, which drops the same messages without a summary.
func Summarize(ctx context.Context, msgs []Message, maxTokens, keepRecent int, count TokenCounter, summarize Summarizer) ([]Message, error) {
	return SummarizeWith(ctx, msgs, Options{MaxTokens: maxTokens, KeepRecent: keepRecent, Count: count}, summarize)
}

// SummarizeWith is Summarize with every option (see Compact); the summary
// counts as one message toward MaxMessages.
func SummarizeWith(ctx context.Context, msgs []Message, o Options, summarize Summarizer) ([]Message, error) {
	maxTokens := o.MaxTokens
	if summarize == nil {
		return nil, errors.New("compaction: nil summarizer")
	}
	p := newPlan(ctx, msgs, o, true)
	if p.err != nil {
		return nil, p.err
	}
	old := 0 // tokens of earlier summaries
	for _, i := range p.summaries {
		old += p.tokens[i]
	}
	// Reserve room for the new summary: at least what an empty one costs.
	reserve := max(old, p.count(Message{Role: RoleSystem, Name: SummaryName, Content: SummaryPrefix, Summary: true}))
	within := (maxTokens <= 0 || p.total+old <= maxTokens) && (p.maxMessages <= 0 || p.kept+len(p.summaries) <= p.maxMessages)
	if within || !p.dropWhileOver(maxTokens, reserve) {
		if p.err != nil {
			return nil, p.err
		}
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
		summary := Message{Role: RoleSystem, Name: SummaryName, Content: SummaryPrefix + text, Summary: true}
		cost := p.count(summary)
		if !p.dropWhileOver(maxTokens, cost) {
			if p.err != nil {
				return nil, p.err
			}
			if p.over(maxTokens, cost) && (!p.over(maxTokens, 0) || cost > p.replaced()) {
				return nil, ErrSummaryTooLong
			}
			return p.output(&summary), nil
		}
	}
}

// plan holds the analysis of one transcript and the drop decisions made on it.
type plan struct {
	msgs   []Message
	count  TokenCounter
	tokens []int
	keep   []bool
	unitOf []int  // message -> its unit, -1 for system messages, summaries and orphans
	units  []unit // units in order of their first message
	order  []int  // units in the order they are dropped
	next   int    // index in order of the next unit to consider dropping
	total  int    // tokens of the kept messages
	kept   int    // number of kept messages
	// maxMessages bounds kept (<= 0: none).
	maxMessages int
	summaries   []int // indices of earlier summaries (Summarize only); not in total
	// joined maps a unit to the unit it was joined into (itself when none)
	// while newPlan reads the transcript (see answeredUnit).
	joined []int
	// ctx stops the work when it ends; err is its error then, and the
	// plan's decisions are incomplete.
	ctx context.Context
	err error
	// steps counts the elementary steps of the work, so that a test can
	// hold it to a bound linear in the transcript.
	steps int
	// look is the step from which stopped looks at ctx again.
	look int
}

// stopped counts a step and reports whether the work must stop: it looks
// at ctx once 1024 steps have passed since it last did, however many of
// them the work counted without it.
func (p *plan) stopped() bool {
	p.steps++
	if p.err == nil && p.steps >= p.look {
		p.look = p.steps + 1024
		p.err = p.ctx.Err()
	}
	return p.err != nil
}

// unit is an assistant message with its tool results, or any other single message.
type unit struct {
	idx       []int
	protected bool
	// toolCalls: the unit's first message requests tool calls.
	toolCalls bool
}

func newPlan(ctx context.Context, msgs []Message, o Options, splitSummaries bool) *plan {
	count, keepRecent := o.Count, o.KeepRecent
	if count == nil {
		count = EstimateTokens
	}
	p := &plan{ctx: ctx, look: 1024, msgs: msgs, count: count, maxMessages: o.MaxMessages, tokens: make([]int, len(msgs)), keep: make([]bool, len(msgs)), unitOf: make([]int, len(msgs))}
	unitOf := p.unitOf           // while reading: the unit a message was put in, before later joins
	callUnit := map[string]int{} // tool call id -> unit of its nearest declaration so far
	firstUser := false           // the first user message has been seen
	var conversation []int       // non-system, non-orphan messages in order
	for i, m := range msgs {
		if p.stopped() {
			return p
		}
		unitOf[i] = -1
		switch {
		case m.Role == RoleSystem:
			if splitSummaries && IsSummary(m) {
				p.summaries = append(p.summaries, i)
				p.tokens[i] = count(m)
				continue
			}
		case m.Role == RoleTool:
			// Its result may ride in tool_result parts alone.
			u, ok := p.answeredUnit(callUnit, append([]string{m.ToolCallID}, m.ToolResultIDs...))
			if !ok {
				continue // orphan: dropped
			}
			unitOf[i] = u
			conversation = append(conversation, i)
		default:
			if u, ok := p.answeredUnit(callUnit, m.ToolResultIDs); ok {
				unitOf[i] = u
				conversation = append(conversation, i)
				break
			}
			unitOf[i] = len(p.units)
			p.units = append(p.units, unit{toolCalls: len(m.ToolCalls) > 0,
				protected: m.Pinned || (o.KeepFirstUserTurn && m.Role == RoleUser && !firstUser)})
			p.joined = append(p.joined, unitOf[i])
			if m.Role == RoleUser {
				firstUser = true
			}
			for _, tc := range m.ToolCalls {
				callUnit[tc.ID] = unitOf[i]
			}
			conversation = append(conversation, i)
		}
		if m.Pinned && unitOf[i] >= 0 {
			p.units[unitOf[i]].protected = true
		}
		p.keep[i] = true
		p.kept++
		p.tokens[i] = count(m)
		p.total += p.tokens[i]
	}
	// Resolve the joins: a joined unit's marks go to the unit that leads it,
	// and each message to that unit, in transcript order.
	for ui := range p.units {
		p.steps++
		if r := p.lead(ui); r != ui {
			p.units[r].protected = p.units[r].protected || p.units[ui].protected
			p.units[r].toolCalls = p.units[r].toolCalls || p.units[ui].toolCalls
			p.units[ui] = unit{}
		}
	}
	for i := range msgs {
		if unitOf[i] >= 0 {
			unitOf[i] = p.lead(unitOf[i])
			p.units[unitOf[i]].idx = append(p.units[unitOf[i]].idx, i)
		}
	}
	p.joined = nil
	for _, i := range conversation[max(0, len(conversation)-keepRecent):] {
		p.units[unitOf[i]].protected = true
	}
	p.order = make([]int, len(p.units))
	for ui := range p.order {
		p.order[ui] = ui
	}
	return p
}

// answeredUnit returns the unit of the calls among ids that are declared.
// When they are declared by several units (Anthropic's API merges
// consecutive assistant messages into one turn, so the calls of one turn
// may be split over two messages and answered by one user message), those
// units are joined into the first: a result kept without its call, or a
// call without its result, is a transcript both providers refuse. A join is
// recorded in joined (a union-find forest whose roots are the first units)
// and resolved once the transcript is read, so that joining n units costs
// about n steps.
func (p *plan) answeredUnit(callUnit map[string]int, ids []string) (int, bool) {
	u := -1
	for _, id := range ids {
		p.steps++
		v, ok := callUnit[id]
		if !ok || id == "" {
			continue
		}
		if v = p.lead(v); v == u {
			continue
		}
		if u < 0 {
			u = v
			continue
		}
		u, v = min(u, v), max(u, v)
		p.joined[v] = u
	}
	return u, u >= 0
}

// lead returns the unit that unit u was joined into, itself when none,
// halving the paths it walks.
func (p *plan) lead(u int) int {
	for p.joined[u] != u {
		p.steps++
		p.joined[u] = p.joined[p.joined[u]]
		u = p.joined[u]
	}
	return u
}

// over reports whether the kept messages plus reserve tokens exceed maxTokens, or the kept
// messages (plus one when a summary is reserved) exceed maxMessages.
func (p *plan) over(maxTokens, reserve int) bool {
	if maxTokens > 0 && p.total+reserve > maxTokens {
		return true
	}
	extra := 0
	if reserve > 0 {
		extra = 1
	}
	return p.maxMessages > 0 && p.kept+extra > p.maxMessages
}

// dropWhileOver drops unprotected units, in order, while the plan is over (see over), and
// then keeps a user message first (see userFirst). It reports whether this call changed
// which messages are kept.
func (p *plan) dropWhileOver(maxTokens, reserve int) bool {
	before := slices.Clone(p.keep)
	for {
		for p.over(maxTokens, reserve) && p.next < len(p.order) {
			if p.stopped() {
				return false
			}
			ui := p.order[p.next]
			p.next++
			if !p.units[ui].protected {
				p.drop(ui)
			}
		}
		if !p.userFirst() {
			return !slices.Equal(before, p.keep)
		}
	}
}

// drop drops unit ui, unless it is dropped already.
func (p *plan) drop(ui int) {
	for _, i := range p.units[ui].idx {
		if p.keep[i] {
			p.keep[i] = false
			p.kept--
			p.total -= p.tokens[i]
		}
	}
}

// userFirst keeps the conversation asking before it is answered where the cut went: a user
// message first, and no assistant message right after another (system messages aside) that
// the input had a user message between. Anthropic's API refuses a transcript whose first
// message (after the system prompt) is not the user's; a server whose chat template wants
// the roles to alternate refuses two assistant messages in a row; and a model reads an answer
// without its question poorly. While the cut leaves such an assistant message, with a
// dropped user message before it (after the kept message before it), the unit it leads is
// dropped too; when that unit is protected (recent, pinned, a side-effecting call, as the
// last calls of a long run of tool calls after one request are), the dropped user message
// nearest before it is kept again instead, and protected. userFirst reports whether it kept a
// message again, which may put the plan over its budget again. A conversation that the input
// itself shaped otherwise (opened by the assistant, two assistant messages in a row) is left
// so.
func (p *plan) userFirst() bool {
	from, prev, asked := 0, -1, -1
	for {
		var at, before int
		at, asked, before = p.unasked(from, prev, asked)
		if at < 0 {
			return false
		}
		if ui := p.unitOf[at]; !p.units[ui].protected {
			// The unit's other messages follow at: the scan goes on from there.
			p.drop(ui)
			from, prev = at, before
			continue
		}
		ui := p.unitOf[asked]
		p.units[ui].protected = true
		for _, i := range p.units[ui].idx {
			if !p.keep[i] {
				p.keep[i] = true
				p.kept++
				p.total += p.tokens[i]
			}
		}
		return true
	}
}

// unasked returns the first kept message from message from on that the cut left without the
// user message before it, that dropped user message (see userFirst), and the kept message
// before it (system messages aside); -1, -1, -1 when there is none. prev is the kept message
// before from (-1: none), and asked the dropped user message nearest before from after prev
// (-1: none), so that a scan goes on where the last one stopped.
func (p *plan) unasked(from, prev, asked int) (at, _, before int) {
	for i := from; i < len(p.msgs); i++ {
		if p.stopped() {
			return -1, -1, -1
		}
		if !p.inUnit(i) {
			continue
		}
		if !p.keep[i] {
			if p.leadsUnit(i) && p.msgs[i].Role == RoleUser {
				asked = i
			}
			continue
		}
		if asked >= 0 && p.leadsUnit(i) && p.msgs[i].Role != RoleUser && (prev < 0 || p.msgs[prev].Role == RoleAssistant) {
			return i, asked, prev
		}
		prev, asked = i, -1
	}
	return -1, -1, -1
}

// leadsUnit reports whether message i is the first of its unit.
func (p *plan) leadsUnit(i int) bool { return p.units[p.unitOf[i]].idx[0] == i }

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

// replaced returns the tokens of the messages a summary replaces: earlier summaries and the
// dropped messages of units.
func (p *plan) replaced() int {
	n := 0
	for i := range p.msgs {
		if p.isSummary(i) || (!p.keep[i] && p.inUnit(i)) {
			n += p.tokens[i]
		}
	}
	return n
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
