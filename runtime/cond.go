package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// Predicate is a compiled CEL predicate of a plan, evaluated over a call of
// its stage. It is safe for concurrent use.
type Predicate struct {
	prog  *predicate.Program
	stage plan.Stage
	phase string
}

// compilePredicate rebuilds the predicate's environment (typing args from the
// argument schemas of the tools it is scoped to) and compiles its source. A
// predicate of another stage than stage, where it is evaluated, is an error:
// its variables would be missing on every call.
func compilePredicate(p *plan.Plan, pr *plan.Predicate, stage plan.Stage) (*Predicate, error) {
	if pr.Stage != stage {
		return nil, fmt.Errorf("predicate of stage %q used in the %s stage", pr.Stage, stage)
	}
	spec := predicate.Spec{
		Stage:     predicate.Stage(pr.Stage),
		Phase:     predicate.Phase(pr.Phase),
		Source:    pr.Source,
		CostLimit: pr.CostLimit,
		Given:     pr.Given,
	}
	if pr.Stage == plan.StageTool {
		// An undeclared tool, or one without a schema, leaves args untyped.
		for _, t := range pr.Tools {
			spec.ArgsSchemas = append(spec.ArgsSchemas, json.RawMessage(p.Tools[t].Args))
		}
	}
	prog, err := predicate.CompileSpec(spec)
	if err != nil {
		return nil, err
	}
	return &Predicate{prog: prog, stage: pr.Stage, phase: pr.Phase}, nil
}

// Source returns the predicate's CEL text.
func (p *Predicate) Source() string { return p.prog.Source() }

// Stage returns the stage the predicate was compiled for.
func (p *Predicate) Stage() plan.Stage { return p.stage }

// Phase returns "before", "after" or "" (before).
func (p *Predicate) Phase() string { return p.phase }

func runInfo(r *Run) predicate.RunInfo {
	return predicate.RunInfo{ID: r.ID, Agent: r.Agent, Meta: r.Meta}
}

// EvalChat evaluates a chat predicate over c; resp is the response for an
// after-phase predicate (nil before the call). A message's content is its
// own text (predicateContent); EvalChatTurns reads the turns whole too.
func (p *Predicate) EvalChat(ctx context.Context, c *ChatCall, resp *ChatResponse) (bool, error) {
	return p.evalChat(ctx, c, resp, nil)
}

// EvalChatTurns evaluates a chat predicate over c as EvalChat does, then,
// when a turn of c's transcript holds texts its messages read apart
// (TurnContents), again with the content of the last message of such a
// turn the turn's text run together: asSent is the first verdict, whole the
// second (asSent again when there is no such turn). A guard that blocks
// on either reads a phrase cut across the messages of one turn as the
// model reads it, and every message as before. The first error is
// returned.
func (p *Predicate) EvalChatTurns(ctx context.Context, c *ChatCall, resp *ChatResponse) (asSent, whole bool, err error) {
	asSent, err = p.evalChat(ctx, c, resp, nil)
	if err != nil {
		return false, false, err
	}
	contents := TurnContents(c.Request.Messages)
	if contents == nil {
		return asSent, asSent, nil
	}
	whole, err = p.evalChat(ctx, c, resp, contents)
	return asSent, whole, err
}

// evalChat evaluates the predicate with contents[i], when contents is not
// nil, as the content of message i.
func (p *Predicate) evalChat(ctx context.Context, c *ChatCall, resp *ChatResponse, contents []string) (bool, error) {
	v := chatVars.Get().(*predicate.ChatVars)
	msgs := v.Request.Messages[:0]
	*v = predicate.ChatVars{Run: runInfo(&c.Meta.Run)}
	v.Request.Model = c.Request.Model
	v.Request.MaxTokens = int64(c.Request.MaxTokens)
	if len(c.Request.Messages) > 0 {
		for i := range c.Request.Messages {
			m := &c.Request.Messages[i]
			if m.Role == "user" && m.hasResults() {
				msgs = appendResultMessages(msgs, c.Request.Messages, i, contents)
				continue
			}
			content := ""
			if contents != nil {
				content = contents[i]
			} else {
				content = predicateContent(m)
			}
			msgs = append(msgs, predicate.Message{Role: m.Role, Content: content, Name: m.Name, ToolCallID: m.ToolCallID,
				ToolCalls: predicateCalls(m.ToolCalls)})
		}
		v.Request.Messages = msgs
	}
	if n := len(c.Request.Tools); n > 0 {
		defs := make([]predicate.ToolDef, n)
		for i, t := range c.Request.Tools {
			defs[i] = predicate.ToolDef{Name: t.Name, Description: t.Description}
		}
		v.Request.Tools = defs
	}
	v.Request.Params = chatParams(&c.Request)
	if resp != nil {
		v.HasResponse = true
		v.Response = predicate.ChatResponse{Text: resp.Text, Model: resp.Model, FinishReason: resp.FinishReason, Refusal: resp.Refusal,
			Usage: predicate.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
				CachedInputTokens: resp.Usage.CachedInputTokens, CacheWriteInputTokens: resp.Usage.CacheWriteInputTokens,
				CacheWrite1hInputTokens: resp.Usage.CacheWrite1hInputTokens,
				ReasoningTokens:         resp.Usage.ReasoningTokens}}
		v.Response.ToolCalls = predicateCalls(resp.ToolCalls)
	}
	ok, err := p.prog.Eval(ctx, v)
	// The messages' backing array is kept for the next evaluation, emptied
	// so that it holds on to no request; a large one is let go.
	clear(msgs)
	*v = predicate.ChatVars{}
	if cap(msgs) <= maxPooledMessages {
		v.Request.Messages = msgs[:0]
	}
	chatVars.Put(v)
	return ok, err
}

// hasResults reports whether m carries a tool_result part.
func (m *Message) hasResults() bool {
	for i := range m.Parts {
		if m.Parts[i].Type == PartToolResult {
			return true
		}
	}
	return false
}

// appendResultMessages appends user message msgs[i], which carries tool
// results (Anthropic's tool_result blocks), as a predicate reads it: as
// the tool messages an OpenAI client sends, each a tool message with the
// id of the call it answers, its content the result's text and that of
// its images (ContentPart.HeldText, joined by line breaks), followed by
// a user message of the rest of its content, if any. A guard keyed on
// role 'tool' or on tool_call_id thus reads a conversation alike on all
// routes, and one keyed on role 'user' does not read a tool's output as
// the user's words. With contents (the turns read whole), the last of
// them holds contents[i] when msgs[i] ends its turn, as the last message
// of a turn does.
func appendResultMessages(out []predicate.Message, msgs []Message, i int, contents []string) []predicate.Message {
	m := &msgs[i]
	rest := *m
	rest.Parts = make([]ContentPart, 0, len(m.Parts))
	for j := 0; j < len(m.Parts); j++ {
		p := &m.Parts[j]
		if p.Type != PartToolResult {
			if !m.resultPart(j) {
				rest.Parts = append(rest.Parts, *p)
			}
			continue
		}
		var b strings.Builder
		b.WriteString(p.Text)
		for k := j + 1; k < len(m.Parts) && m.Parts[k].Type == PartImage && m.resultPart(k); k++ {
			if text := m.Parts[k].HeldText(); text != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(text)
			}
		}
		out = append(out, predicate.Message{Role: "tool", Content: b.String(), ToolCallID: p.ToolCallID})
	}
	if rest.Content != "" || slices.ContainsFunc(rest.Parts, sentPart) || len(rest.ToolCalls) != 0 {
		out = append(out, predicate.Message{Role: rest.Role, Content: predicateContent(&rest), Name: rest.Name,
			ToolCalls: predicateCalls(rest.ToolCalls)})
	}
	if contents != nil && (i+1 == len(msgs) || !msgs[i+1].userTurn()) {
		out[len(out)-1].Content = contents[i]
	}
	return out
}

// sentPart reports whether a provider sends part p of a user message: an
// empty text part (one a prompt-cache breakpoint marks, beside tool
// results) is left out, as the API refuses an empty text block, and no
// user message of it is read beside the results.
func sentPart(p ContentPart) bool { return p.Type != PartText || p.Text != "" }

// maxPooledMessages bounds the messages array an activation kept for reuse.
const maxPooledMessages = 64

// predicateCalls is tool calls as a predicate reads them (nil for none).
func predicateCalls(uses []ToolUse) []predicate.ToolCall {
	if len(uses) == 0 {
		return nil
	}
	calls := make([]predicate.ToolCall, len(uses))
	for i, t := range uses {
		calls[i] = predicate.ToolCall{ID: t.ID, Name: t.Name, Arguments: t.Arguments}
	}
	return calls
}

// predicateContent is a message's content as a predicate reads it, as
// the model reads it: its Content and the text each of its parts holds
// (ContentPart.HeldText: a text or tool_result part's, the text an image
// part carries in place of an image), in order, adjacent texts run
// together where the model reads them so (Message.RunsOn: plain text
// parts of a message other than a tool message, a prompt-cache
// breakpoint between them or not), else joined by a line break. A guard
// over m.content thus sees the same text whether a client sent a string
// or parts, a tool result in either wire shape, and the text pii,
// security and content_filter read in an image part; a phrase split
// across two text parts is read whole, as the model reads it, and two
// parts an image or a tool call stands between are not read as one.
func predicateContent(m *Message) string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for i := range m.Parts {
		p := &m.Parts[i]
		text := p.HeldText()
		if text == "" && p.Type != PartText && p.Type != PartToolResult {
			continue // no text: an image's own bytes, a PDF, thinking
		}
		if b.Len() > 0 && !m.RunsOn(i) {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	}
	return b.String()
}

// TurnContents returns the content of each message of msgs as a predicate
// reads it with the turns whole: the last message of each turn
// (SentTurnEnd) holds the turn's text run together, as a model reads the
// blocks of a turn (turnText: the texts each of its messages holds, in
// order, adjacent ones run together, a tool result and the user's text
// after it among them, and a line break where an image, a thinking block,
// a tool call or a document stands between two), and every other
// message its own content (predicateContent), so that the texts read are
// at most twice those sent. It returns nil when every turn's text is its
// last message's own content: every turn is one message, read so already
// (one with tool results read as tool messages and the user's,
// appendResultMessages, when the last of them reads the turn's text).
// The system messages, when they are not one turn, are read as one too, the
// last of them holding their texts run together.
func TurnContents(msgs []Message) []string {
	var contents []string
	for i := 0; i < len(msgs); {
		j := SentTurnEnd(msgs, i)
		if j == i+1 && len(msgs[i].Parts) == 0 {
			// A turn of one message of plain content: read so already.
			if contents != nil {
				contents[i] = msgs[i].Content
			}
			i = j
			continue
		}
		if text := turnText(msgs[i:j]); contents != nil || text != sentContent(msgs[j-1:j]) {
			if contents == nil {
				contents = make([]string, len(msgs))
				for k := range i {
					contents[k] = sentContent(msgs[k : k+1])
				}
			}
			for k := i; k < j-1; k++ {
				contents[k] = sentContent(msgs[k : k+1])
			}
			contents[j-1] = text
		}
		i = j
	}
	// Anthropic's API sends the system messages, wherever they sit, as the
	// blocks of one system prompt: the last of them, when they are not one
	// turn, holds their texts run together.
	n, first, last := 0, -1, -1
	for k := range msgs {
		if msgs[k].Role == "system" && !msgs[k].grounding() {
			n++
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if n >= 2 && last-first+1 > n {
		sys := make([]Message, 0, n)
		for k := first; k <= last; k++ {
			if msgs[k].Role == "system" && !msgs[k].grounding() {
				sys = append(sys, msgs[k])
			}
		}
		if contents == nil {
			contents = make([]string, len(msgs))
			for k := range msgs {
				contents[k] = sentContent(msgs[k : k+1])
			}
		}
		contents[last] = turnText(sys)
	}
	return contents
}

// sentContent is the content the last message read of m (one message)
// holds, as sent: its own (predicateContent), or, for a user message with
// tool results, read as tool messages and the user's
// (appendResultMessages), that of the last of them. A turn whose text is
// that reads whole as sent, and needs no second reading.
func sentContent(m []Message) string {
	if m[0].Role != "user" || !m[0].hasResults() {
		return predicateContent(&m[0])
	}
	var out [4]predicate.Message
	read := appendResultMessages(out[:0], m, 0, nil)
	return read[len(read)-1].Content
}

// turnText is the text of turn, the messages of one turn, as a model reads
// its blocks: adjacent texts (a message's content, its text parts, a tool
// result, across the messages too) run together, and where something
// stands between two texts that a message's own content
// (predicateContent) reads as a boundary, an image, a thinking block, a
// tool call or a document, a line break does; a tool message is one
// result, its text parts joined by line breaks. A message's tool_result
// parts, each with the images of its result after it, are read before its
// content and its other parts, wherever they sit among them: both
// providers send them first (Anthropic's API as the first blocks of the
// user turn, OpenAI's as tool messages before the user's), and pii and
// redact read a turn in that order too.
func turnText(turn []Message) string {
	var b strings.Builder
	apart := false // a boundary stands after the text written
	put := func(text string) {
		if text == "" {
			return
		}
		if apart && b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
		apart = false
	}
	for k := range turn {
		m := &turn[k]
		if m.Role == "tool" {
			put(predicateContent(m))
			// An image (a document) ending the result stands between
			// its text and the next, as one of a tool_result part does.
			if n := len(m.Parts); n > 0 && !m.Parts[n-1].plainText() && m.Parts[n-1].Type != PartToolResult {
				apart = true
			}
			continue
		}
		read := func(i int) {
			p := &m.Parts[i]
			apart = apart || m.callAt(i)
			if p.plainText() || p.Type == PartToolResult {
				put(p.Text)
				return
			}
			apart = true
			put(p.HeldText())
			apart = true
		}
		for i := range m.Parts {
			if m.resultPart(i) {
				read(i)
			}
		}
		put(m.Content)
		for i := range m.Parts {
			if !m.resultPart(i) {
				read(i)
			}
		}
		apart = apart || m.callAt(len(m.Parts))
	}
	return b.String()
}

// resultPart reports whether part i of m is one of its tool results a
// provider sends before the rest of the message: a tool_result part, or an
// image of the result it follows (of its ToolCallID, with only such images
// between them).
func (m *Message) resultPart(i int) bool {
	p := &m.Parts[i]
	if p.Type == PartToolResult {
		return true
	}
	if p.Type != PartImage {
		return false
	}
	k := i - 1
	for k >= 0 && m.Parts[k].Type == PartImage && m.Parts[k].ToolCallID == p.ToolCallID {
		k--
	}
	return k >= 0 && m.Parts[k].Type == PartToolResult && m.Parts[k].ToolCallID == p.ToolCallID
}

// callAt reports whether one of m's tool calls stands before part i
// (len(m.Parts): after the last).
func (m *Message) callAt(i int) bool {
	for k := range m.ToolCalls {
		if m.CallPlace(k) == i {
			return true
		}
	}
	return false
}

// TurnEnd returns the end of the turn msgs[i] starts: j > i such that
// msgs[i:j] are the consecutive messages of msgs[i]'s role (user, assistant
// or system) a provider sends as one turn, none of them the grounding
// block (GroundingKey). Anthropic's API merges consecutive user or
// assistant messages into one turn, and sends the system messages as the
// blocks of one system prompt; a model reads the texts of a turn run
// together. A message of another role (a tool message) or the grounding
// block is a turn of its own (i+1).
func TurnEnd(msgs []Message, i int) int {
	msg := &msgs[i]
	j := i + 1
	if msg.grounding() || msg.Role != "user" && msg.Role != "assistant" && msg.Role != "system" {
		return j
	}
	for j < len(msgs) && msgs[j].Role == msg.Role && !msgs[j].grounding() {
		j++
	}
	return j
}

// SentTurnEnd returns the end of the turn msgs[i] starts as Anthropic's
// API sends it: TurnEnd, except that a tool message and the user messages
// and tool messages on either side of it are one user turn. That API sends
// a tool result as a tool_result block of a user message, the results of
// consecutive tool messages in one, with the text of the user message
// after them, and merges consecutive user messages; a model reads the
// blocks of the turn in order. (An OpenAI model reads each tool message
// where it is; reading them together as well reads more, never less.)
func SentTurnEnd(msgs []Message, i int) int {
	if !msgs[i].userTurn() {
		return TurnEnd(msgs, i)
	}
	j := i + 1
	for j < len(msgs) && msgs[j].userTurn() {
		j++
	}
	return j
}

// grounding reports whether m is the grounding block the runtime injected.
func (m *Message) grounding() bool { return m.Metadata[GroundingKey] == "true" }

// userTurn reports whether m is a user or tool message Anthropic's API
// sends in a user turn, not the grounding block.
func (m *Message) userTurn() bool { return (m.Role == "user" || m.Role == "tool") && !m.grounding() }

// chatParams is request.params of r. Its metadata's user_id is the end
// user's id the provider is sent: the safety identifier when r has one
// (OpenAI's successor to user, which the anthropic provider sends as
// metadata.user_id in its place), else Metadata's.
func chatParams(r *ChatRequest) predicate.Params {
	p := predicate.Params{Temperature: r.Temperature, TopP: r.TopP, Stop: r.Stop, Seed: r.Seed,
		ToolChoice: r.ToolChoice, Metadata: r.Metadata}
	if id := r.SafetyIdentifier; id != "" && r.Metadata["user_id"] != id {
		p.Metadata = maps.Clone(r.Metadata)
		if p.Metadata == nil {
			p.Metadata = make(map[string]string, 1)
		}
		p.Metadata["user_id"] = id
	}
	if r.ResponseFormat != nil {
		p.ResponseFormat = r.ResponseFormat.Type
	}
	return p
}

// toolActivationInfo returns the CEL variable `tool` of t, once t's
// effects are settled (settleEffects): every tool entry passes here when the
// pipeline is built, and so does an undeclared tool's on entry to the chain.
func toolActivationInfo(t *ToolInfo) *predicate.ToolInfo {
	t.settleEffects()
	return &predicate.ToolInfo{Name: t.Name, SideEffecting: t.SideEffecting, RetrySafe: t.RetrySafe,
		URLArg: t.URLArg, PathArg: t.PathArg}
}

// EvalTool evaluates a tool predicate over c; with hasResult, `result` is
// bound to result (after phase).
func (p *Predicate) EvalTool(ctx context.Context, c *ToolCall, result any, hasResult bool) (bool, error) {
	v := toolVars.Get().(*predicate.ToolVars)
	v.Run, v.Args, v.Result, v.HasResult = runInfo(&c.Meta.Run), c.Args, result, hasResult
	if c.entry != nil {
		v.Tool = *c.entry.pinfo
	} else if c.Tool != nil {
		v.Tool = *toolActivationInfo(c.Tool)
	}
	if v.Args == nil {
		v.Args = emptyArgs
	}
	ok, err := p.prog.Eval(ctx, v)
	*v = predicate.ToolVars{}
	toolVars.Put(v)
	return ok, err
}

// Activations are recycled: an evaluation does not keep its activation.
var (
	toolVars  = sync.Pool{New: func() any { return new(predicate.ToolVars) }}
	chatVars  = sync.Pool{New: func() any { return new(predicate.ChatVars) }}
	emptyArgs = map[string]any{}
)

// EvalTurn evaluates a turn predicate over c; with hasOutput, `output` and
// `status` are bound (after phase; err gives the status), output as the
// turn's output (output.final).
func (p *Predicate) EvalTurn(ctx context.Context, c *TurnCall, output string, err error, hasOutput bool) (bool, error) {
	return p.evalTurn(ctx, c, output, err, hasOutput, true)
}

// EvalTurnEarlier evaluates an after-phase turn predicate over c with
// text, the text an earlier answer of the turn wrote beside its tool
// calls (TurnCall.Earlier), as `output.text`, and `output.final` false.
func (p *Predicate) EvalTurnEarlier(ctx context.Context, c *TurnCall, text string, err error) (bool, error) {
	return p.evalTurn(ctx, c, text, err, true, false)
}

func (p *Predicate) evalTurn(ctx context.Context, c *TurnCall, output string, err error, hasOutput, final bool) (bool, error) {
	v := &predicate.TurnVars{
		Run:     runInfo(&c.Meta.Run),
		Input:   predicate.TurnInput{Text: c.Input},
		Session: predicate.SessionInfo{ID: c.Session.ID, Meta: c.Session.Meta},
	}
	if hasOutput {
		v.HasOutput = true
		v.Output.Text, v.Output.Final = output, final
		v.Status = Status(err)
	}
	return p.prog.Eval(ctx, v)
}

// EvalItem evaluates an admit predicate over one item.
func (p *Predicate) EvalItem(ctx context.Context, it *Item) (bool, error) {
	v := &predicate.AdmitVars{Item: predicate.Item{ID: it.ID, Content: it.Content, Source: it.Source, Score: it.Score, Metadata: it.Metadata}}
	if v.Item.Metadata == nil {
		v.Item.Metadata = map[string]any{}
	}
	return p.prog.Eval(ctx, v)
}
