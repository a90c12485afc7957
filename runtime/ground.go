package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime/grounding"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Retriever finds the grounding items for a query: the host's retrieval
// (a search index, a vector store). A pipeline whose plan has a grounding
// section calls it on the first model call of each run, or of each turn
// with reground_every_turn (Deps.Retriever).
type Retriever interface {
	Retrieve(ctx context.Context, q RetrievalQuery) ([]Item, error)
}

// RetrieverFunc adapts a func to Retriever.
type RetrieverFunc func(ctx context.Context, q RetrievalQuery) ([]Item, error)

// Retrieve calls f.
func (f RetrieverFunc) Retrieve(ctx context.Context, q RetrievalQuery) ([]Item, error) {
	return f(ctx, q)
}

// RetrievalQuery is what grounding retrieves items for.
type RetrievalQuery struct {
	// Text is the turn's input, or outside a turn the text of the
	// request's last user message.
	Text string
	// Run is the run the call belongs to.
	Run Run
}

// The outcomes of a retrieved item in a grounding record.
const (
	// GroundedPrompt: the item was rendered into the block (or, without a
	// render template, admitted).
	GroundedPrompt = "prompt"
	// GroundedBudget: the item was admitted, then dropped by max_tokens.
	GroundedBudget = "budget"
	// GroundedRefused: the admit predicate refused the item (or failed on
	// it).
	GroundedRefused = "refused"
	// GroundedFlagged: a screening layer of the chat chain
	// (GroundingScreener) flagged the item: it was left out of the block,
	// or, with a layer that blocks, the grounding was blocked for it.
	GroundedFlagged = "flagged"
	// GroundedBlocked: the item was admitted, but the grounding was
	// blocked for another item a screening layer flagged: no block was
	// injected.
	GroundedBlocked = "blocked"
)

// GroundingScreener is a chat layer that reads each grounding item before
// the block is rendered: security, pii with action "block", content_filter.
// Every such layer of the chat chain, outermost first, is asked about every
// item the admit predicate let through, whatever its `when` (the block
// serves every call of the run, or turn), so that an item it would flag in
// the block is named, and left out when its policy says so, instead of
// blocking every call that carries the block. The layer still reads the
// whole block at each call. A summarizing compaction has the screening
// layers outside it read its summary the same way (BuildContext.Outer),
// unless they read it as a message (SummaryScreener).
type GroundingScreener interface {
	// ScreenGrounding reads text, one item rendered by the template alone
	// (over an empty query). It returns "" when the layer lets the item
	// through; otherwise what it found, never the text itself ("prompt
	// injection detected (...)", "personal data (email)"), and whether its
	// policy is to drop such an item from the block (true) or to block the
	// call (false).
	ScreenGrounding(ctx context.Context, text string) (found string, drop bool)
}

// SummaryScreener is a GroundingScreener that reads a summary a layer
// wrote of the transcript's earlier messages (a summarizing compaction
// inside it) otherwise than a grounding item: as it reads the transcript's
// own messages. The summary is the account, for the assistant, of a
// transcript the layer read raw before it was compacted (its tool results
// as documents), so a check it runs only on documents (security's
// instructions about the reader's response) would refuse the account of
// what a user asked ("the user asked the assistant to add some emojis to
// the response"). A GroundingScreener that is not one reads the summary
// with ScreenGrounding.
type SummaryScreener interface {
	// ScreenSummary is ScreenGrounding for the summary: it returns what the
	// layer found in text, or "", and whether its grounding policy is to
	// drop such a text (true) or to block the call (false).
	ScreenSummary(ctx context.Context, text string) (found string, drop bool)
}

// GroundingKey marks the message grounding injects: its Metadata holds
// GroundingKey: "true". The block carries text whoever wrote the retrieved
// sources controls, so the content detectors (security, pii,
// content_filter) read a message so marked as a document, as they read a
// tool result, wherever it is placed and whatever their `system` setting.
// The message is pinned too ("pin": "true"), so that compaction keeps it.
const GroundingKey = "grounding"

// SummaryKey marks a summary a summarizing compaction wrote of the
// transcript's earlier messages: its Metadata holds SummaryKey: "true"
// beside GroundingKey: "true". Such a message is read whatever a
// detector's `system` setting, as the grounding block is, but as the
// transcript's own messages are, not as a document (see SummaryScreener),
// and a detector that flags it names the summary.
const SummaryKey = "compaction_summary"

// LayerGrounding names the grounding records' layer and the errors of
// grounding.
const LayerGrounding = "grounding"

// Grounded is the outcome of one grounding: the items retrieved for Query
// split by what became of them, each list in retrieval order, and the block
// rendered from the items that reached the prompt.
type Grounded struct {
	Query string `json:"query"`
	// Block is the rendered block ("" without a render template, or when
	// no item fits the budget); Tokens its estimate (EstimateTokens).
	Block  string `json:"block,omitempty"`
	Tokens int64  `json:"tokens,omitempty"`
	// Prompt are the items in the block; Dropped those the budget dropped;
	// Refused those the admit predicate refused, or that could not be
	// rendered safely.
	Prompt  []Item `json:"prompt"`
	Dropped []Item `json:"dropped,omitempty"`
	Refused []Item `json:"refused,omitempty"`
	// Flagged are the admitted items a screening layer flagged
	// (GroundingScreener), and FlaggedWhy, item for item, the layer and
	// what it found ("security: prompt injection detected (...)").
	Flagged    []Item   `json:"flagged,omitempty"`
	FlaggedWhy []string `json:"flagged_why,omitempty"`
	// RefusedWhy is, item for item with Refused, why an item was refused
	// when the predicate did not simply answer false ("" when it did): its
	// evaluation failed, or its text holds a delimiter of the render
	// template (grounding.Template.Breaks). Nil when no item has a reason.
	RefusedWhy []string `json:"refused_why,omitempty"`
}

// groundingPlan is the built grounding section.
type groundingPlan struct {
	cfg       *plan.Grounding
	tpl       *grounding.Template // nil without render
	maxTokens int64
	sink      AuditSink // nil without record_grounding
	// screens are the chat chain's GroundingScreener layers, outermost
	// first.
	screens []screener

	mu sync.Mutex
	// runs holds each run's grounding (once per run, not every turn),
	// until the run ends.
	runs map[string]*groundOnce
	// gen counts the calls of Reground: a grounding computed under an
	// earlier count is computed again.
	gen atomic.Uint64
}

// groundOnce is the grounding of one run or one turn, computed by its first
// model call; a failed one is tried again by the next call.
type groundOnce struct {
	mu    sync.Mutex
	done  bool
	gen   uint64 // groundingPlan.gen when done
	block string
}

// The values of a screening layer's `grounding` setting: what an item it
// flags does.
const (
	// GroundingBlock blocks the grounding, and so the call, naming the item.
	GroundingBlock = "block"
	// GroundingDrop leaves the item out of the block.
	GroundingDrop = "drop"
)

// CheckGroundingSetting checks a screening layer's `grounding` setting:
// empty (the layer's default), GroundingBlock or GroundingDrop.
func CheckGroundingSetting(s string) error {
	if s != "" && s != GroundingBlock && s != GroundingDrop {
		return fmt.Errorf("grounding must be %q or %q, got %q", GroundingBlock, GroundingDrop, s)
	}
	return nil
}

// screener is a GroundingScreener layer and its name.
type screener struct {
	name string
	s    GroundingScreener
}

// turnGrounding rides on a turn's context: its input and, with
// reground_every_turn, its grounding.
type turnGrounding struct {
	input string
	once  groundOnce
}

type turnGroundingKey struct{}

// buildGrounding compiles the plan's grounding section.
func (pl *Pipeline) buildGrounding(ctx context.Context) error {
	g := pl.plan.Grounding
	if g == nil {
		if pl.plan.Admit != nil && pl.deps.Retriever == nil {
			pl.logger.Warn("the policy's admit predicate is set but runtime.Deps.Retriever is not: no item is retrieved, so it admits only what a host passes to Pipeline.Ground; under agentc serve, which has no retriever, it never runs")
		}
		return nil
	}
	gp := &groundingPlan{cfg: g, runs: map[string]*groundOnce{}}
	if r := g.Render; r != nil {
		t, err := grounding.Parse(r.Template)
		if err != nil {
			return fmt.Errorf("build grounding.render.template: %w", err)
		}
		gp.tpl, gp.maxTokens = t, int64(r.MaxTokens)
		for _, l := range pl.layers[plan.StageChat] {
			if s, ok := l.Middleware.(GroundingScreener); ok {
				gp.screens = append(gp.screens, screener{name: l.Name, s: s})
			}
		}
		if r.Placement != "" && r.Placement != plan.PlacementSystem && r.Placement != plan.PlacementBeforeLastUser {
			return fmt.Errorf("build grounding.render.placement: %q is not %q or %q", r.Placement, plan.PlacementSystem, plan.PlacementBeforeLastUser)
		}
	}
	if g.Record {
		s, err := pl.auditSink(ctx, g.Sink)
		if err != nil {
			return fmt.Errorf("build grounding.sink: %w", err)
		}
		gp.sink = s
	}
	if pl.deps.Retriever == nil && (gp.tpl != nil || g.EveryTurn) {
		pl.logger.Warn("the policy's grounding section is set but runtime.Deps.Retriever is not: no item is retrieved nor injected into requests; call Pipeline.Ground with the host's items")
	}
	pl.grounding = gp
	return nil
}

// Ground admits items (retrieved for query) with the plan's admit predicate,
// has the chat chain's screening layers read each admitted item
// (GroundingScreener), renders the items that pass with grounding.render
// (dropping the lowest scored until the block fits max_tokens) and, with
// record_grounding, appends one audit record saying what became of each
// item. It injects nothing: the chat calls of a pipeline with a Retriever
// do that by themselves. A plan without a grounding section admits and
// reports. An item whose admission fails is refused and the joined
// evaluation errors are returned with the result. An item a screening
// layer flags is left out of the block when the layer's policy drops it;
// otherwise the grounding is blocked: no block, and a *BlockedError of the
// layer naming the item (by id and source, never its text). A render or
// audit failure returns an error and no block.
func (pl *Pipeline) Ground(ctx context.Context, query string, items []Item) (Grounded, error) {
	if pl.closed.Load() {
		return Grounded{Query: query, Prompt: []Item{}}, errClosedCall
	}
	g := Grounded{Query: query, Prompt: []Item{}}
	gp := pl.grounding
	admitted := make([]grounding.Item, 0, len(items))
	outcome := make([]string, len(items))
	for i := range outcome {
		outcome[i] = GroundedRefused
	}
	why := map[int]string{}
	refuse := func(i int, reason string) {
		g.Refused = append(g.Refused, items[i])
		g.RefusedWhy = append(g.RefusedWhy, reason)
		if reason != "" {
			why[i] = reason
		}
	}
	admitErr := pl.admission(ctx, items, func(i int, ok bool, err error) {
		switch {
		case err != nil:
			refuse(i, "admit: "+err.Error())
			return
		case !ok:
			refuse(i, "")
			return
		}
		it := &items[i]
		gi := grounding.Item{ID: it.ID, Content: it.Content, Source: it.Source, Score: it.Score, Metadata: it.Metadata, Index: i}
		if gp != nil && gp.tpl != nil {
			if d, bad := gp.tpl.Breaks(&gi); bad {
				refuse(i, fmt.Sprintf("its text holds %q, a delimiter of the render template: it could close its frame in the block", d))
				return
			}
		}
		admitted = append(admitted, gi)
	})
	if err := ctx.Err(); err != nil {
		return Grounded{}, err
	}
	if len(why) == 0 {
		g.RefusedWhy = nil
	}
	var blocked *BlockedError
	if gp != nil && gp.tpl != nil && len(gp.screens) > 0 {
		var pass []grounding.Item
		pass, blocked = gp.screen(ctx, admitted, items, func(i int, reason string) {
			g.Flagged = append(g.Flagged, items[i])
			g.FlaggedWhy = append(g.FlaggedWhy, reason)
			outcome[i], why[i] = GroundedFlagged, reason
		})
		if err := ctx.Err(); err != nil {
			return Grounded{}, err
		}
		if blocked == nil {
			admitted = pass
		}
	}
	if blocked != nil {
		for _, it := range admitted {
			if outcome[it.Index] != GroundedFlagged {
				outcome[it.Index] = GroundedBlocked
			}
		}
		if err := pl.recordGrounding(ctx, &g, items, outcome, why, blocked); err != nil {
			return Grounded{}, err
		}
		return g, blocked
	}
	kept := admitted
	var dropped []grounding.Item
	if gp != nil && gp.tpl != nil {
		var err error
		g.Block, kept, dropped, err = gp.tpl.Fit(query, admitted, gp.maxTokens, EstimateTokens)
		if err != nil {
			return Grounded{}, &CallError{Layer: LayerGrounding, Kind: KindPermanent, Message: err.Error()}
		}
		g.Tokens = EstimateTokens(g.Block)
	}
	for _, it := range kept {
		g.Prompt = append(g.Prompt, items[it.Index])
		outcome[it.Index] = GroundedPrompt
	}
	for _, it := range dropped {
		g.Dropped = append(g.Dropped, items[it.Index])
		outcome[it.Index] = GroundedBudget
	}
	if err := pl.recordGrounding(ctx, &g, items, outcome, why, nil); err != nil {
		return Grounded{}, err
	}
	return g, admitErr
}

// screen has every screening layer read each admitted item, rendered alone
// (or, when it does not render alone, its id, source, content and
// metadata), and returns the items that pass. An item a layer flags with
// drop is passed to flagged with the layer's reason and left out; the
// first one a layer flags without drop is passed to flagged too, and ends
// the screening with the *BlockedError the grounding fails with.
func (gp *groundingPlan) screen(ctx context.Context, admitted []grounding.Item, items []Item, flagged func(i int, reason string)) ([]grounding.Item, *BlockedError) {
	var pass []grounding.Item
	for _, gi := range admitted {
		text, err := gp.tpl.Render("", []grounding.Item{gi})
		if err != nil {
			text = strings.Join([]string{gi.ID, gi.Source, gi.Content, fmt.Sprint(gi.Metadata)}, "\n")
		}
		ok := true
		for _, sc := range gp.screens {
			if ctx.Err() != nil {
				return nil, nil
			}
			found, drop := sc.s.ScreenGrounding(ctx, text)
			if found == "" {
				continue
			}
			flagged(gi.Index, sc.name+": "+found)
			if !drop {
				return nil, &BlockedError{Layer: sc.name, Message: itemName(&items[gi.Index], gi.Index) + ": " + found}
			}
			ok = false
			break
		}
		if ok {
			pass = append(pass, gi)
		}
	}
	return pass, nil
}

// itemName names a grounding item in a message by its id (else its index
// in the retrieval) and source, each quoted and cut to maxNameBytes: never
// by its text.
func itemName(it *Item, i int) string {
	name := "grounding item #" + strconv.Itoa(i)
	if it.ID != "" {
		name = "grounding item " + strconv.Quote(clip(it.ID, maxNameBytes))
	}
	if it.Source != "" {
		name += " (source " + strconv.Quote(clip(it.Source, maxNameBytes)) + ")"
	}
	return name
}

// maxNameBytes bounds an item's id and source in a message.
const maxNameBytes = 64

// clip cuts s to at most n bytes, at a character boundary, marking a cut
// with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// recordGrounding appends, with record_grounding, the audit record of one
// grounding (groundingRecord); a failure is a *CallError of layer
// grounding.
func (pl *Pipeline) recordGrounding(ctx context.Context, g *Grounded, items []Item, outcome []string, why map[int]string, blocked *BlockedError) error {
	gp := pl.grounding
	if gp == nil || gp.sink == nil {
		return nil
	}
	if err := gp.sink.Append(ctx, pl.groundingRecord(ctx, g, items, outcome, why, blocked)); err != nil {
		return &CallError{Layer: LayerGrounding, Kind: KindPermanent, Message: "record grounding: " + err.Error()}
	}
	return nil
}

// groundingRecord is the audit record of one grounding: an outcome record
// of stage admit and layer grounding whose Args hold the query, the
// block's estimate and budget, and every retrieved item's index, id,
// source, score and outcome, with the reason of a refusal that has one and
// of a flag. A blocked grounding's record is denied, with the block's
// error.
func (pl *Pipeline) groundingRecord(ctx context.Context, g *Grounded, items []Item, outcome []string, why map[int]string, blocked *BlockedError) AuditRecord {
	list := make([]any, len(items))
	for i := range items {
		e := map[string]any{"index": i, "source": items[i].Source, "score": items[i].Score, "outcome": outcome[i]}
		if items[i].ID != "" {
			e["id"] = items[i].ID
		}
		if r := why[i]; r != "" {
			e["reason"] = r
		}
		list[i] = e
	}
	args := map[string]any{"query": g.Query, "items": list, "tokens": g.Tokens}
	if pl.grounding.maxTokens > 0 {
		args["max_tokens"] = pl.grounding.maxTokens
	}
	rec := AuditRecord{Time: pl.clock().Now(), Layer: LayerGrounding, Stage: plan.StageAdmit, Phase: PhaseOutcome,
		Decision: DecisionOK, Args: args}
	if blocked != nil {
		rec.Decision, rec.ErrorType, rec.ErrorMessage = DecisionDenied, KindOf(blocked), blocked.Error()
	}
	if r := runIn(ctx); r != nil {
		rec.RunID = r.ID
	}
	return rec
}

// groundsCalls reports whether chat calls retrieve and inject by themselves.
func (pl *Pipeline) groundsCalls() bool {
	return pl.grounding != nil && pl.deps.Retriever != nil
}

// withTurnGrounding marks ctx as a turn's for grounding: its input is the
// query, and with reground_every_turn it holds the turn's grounding.
func (pl *Pipeline) withTurnGrounding(ctx context.Context, input string) context.Context {
	if !pl.groundsCalls() {
		return ctx
	}
	return context.WithValue(ctx, turnGroundingKey{}, &turnGrounding{input: input})
}

// groundCall retrieves, admits and renders the grounding of the call's run
// (or turn, with reground_every_turn) on its first model call, and on its
// first after Reground, and injects the block into c's request. A
// retrieval or render failure, or an item a screening layer blocks on,
// fails the call before any layer sees it.
func (pl *Pipeline) groundCall(ctx context.Context, c *ChatCall) error {
	gp := pl.grounding
	turn, _ := ctx.Value(turnGroundingKey{}).(*turnGrounding)
	query := lastUserText(c.Request.Messages)
	if turn != nil {
		query = turn.input
	}
	var once *groundOnce
	switch {
	case gp.cfg.EveryTurn && turn != nil:
		once = &turn.once
	case gp.cfg.EveryTurn:
		once = &groundOnce{} // a call outside a turn is its own turn
	default:
		gp.mu.Lock()
		once = gp.runs[c.Meta.Run.ID]
		if once == nil {
			once = &groundOnce{}
			gp.runs[c.Meta.Run.ID] = once
		}
		gp.mu.Unlock()
	}
	once.mu.Lock()
	if gen := gp.gen.Load(); !once.done || once.gen != gen {
		once.done = false
		items, err := pl.deps.Retriever.Retrieve(ctx, RetrievalQuery{Text: query, Run: c.Meta.Run})
		if err != nil {
			once.mu.Unlock()
			return fmt.Errorf("grounding: retrieve: %w", err)
		}
		g, err := pl.Ground(ctx, query, items)
		var ce *CallError
		var be *BlockedError
		if errors.As(err, &ce) && ce.Layer == LayerGrounding || errors.As(err, &be) {
			// Nothing is kept: the next call retrieves again (the flagged
			// item may be gone from the sources by then).
			once.mu.Unlock()
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			// Cut short: no grounding is kept, the next call grounds.
			once.mu.Unlock()
			return cerr
		}
		if n, first := refusedWithReason(g.RefusedWhy); n > 0 {
			pl.logger.WarnContext(ctx, "grounding: items refused (evaluation failed, or their text could break out of the block)", "items", n, "first", first)
		}
		if n := len(g.Flagged); n > 0 {
			pl.logger.WarnContext(ctx, "grounding: items a screening layer flagged were left out of the block", "items", n,
				"first_id", g.Flagged[0].ID, "first_source", g.Flagged[0].Source, "why", g.FlaggedWhy[0])
		}
		once.block, once.done, once.gen = g.Block, true, gen
	}
	block := once.block
	once.mu.Unlock()
	if block != "" {
		c.Request.Messages = injectBlock(c.Request.Messages, block, gp.cfg.Render.Placement)
	}
	return nil
}

// refusedWithReason counts the refusals that have a reason and returns the
// first: one log line however many items a retrieval holds.
func refusedWithReason(why []string) (int, string) {
	n, first := 0, ""
	for _, r := range why {
		if r != "" {
			if n++; n == 1 {
				first = r
			}
		}
	}
	return n, first
}

// Reground makes the next model call of every run, and of every turn with
// reground_every_turn, retrieve, admit and render its grounding again,
// instead of reusing the block it holds: a host calls it when items are
// revoked at the source (a document withdrawn from the index), so that no
// run keeps carrying them until it ends. A call already under way keeps
// the block it was given. Without a grounding section it does nothing.
func (pl *Pipeline) Reground() {
	if pl.grounding != nil {
		pl.grounding.gen.Add(1)
	}
}

// forgetGrounding drops the grounding of an ended run.
func (pl *Pipeline) forgetGrounding(runID string) {
	if pl.grounding != nil {
		pl.grounding.mu.Lock()
		delete(pl.grounding.runs, runID)
		pl.grounding.mu.Unlock()
	}
}

// injectBlock returns a copy of msgs with the block added: with
// PlacementSystem a system message after the leading system messages; with
// PlacementBeforeLastUser a user message just before the last user message
// (as PlacementSystem when there is none).
// lastUserTurn returns the index of the last user message that is the
// user's own turn, not a carrier of tool results, or -1.
func lastUserTurn(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && !hasToolResult(&msgs[i]) {
			return i
		}
	}
	return -1
}

func hasToolResult(m *Message) bool {
	for i := range m.Parts {
		if m.Parts[i].Type == PartToolResult {
			return true
		}
	}
	return false
}

func injectBlock(msgs []Message, block, placement string) []Message {
	at := -1
	role := "system"
	if placement == plan.PlacementBeforeLastUser {
		// The last message the user wrote: a user message that carries
		// tool results (Anthropic's shape) answers the assistant's tool
		// calls, which it must follow at once.
		if i := lastUserTurn(msgs); i >= 0 {
			at, role = i, "user"
		}
	}
	if at < 0 {
		at = 0
		for at < len(msgs) && msgs[at].Role == "system" {
			at++
		}
	}
	out := make([]Message, 0, len(msgs)+1)
	out = append(out, msgs[:at]...)
	out = append(out, Message{Role: role, Content: block, Metadata: map[string]string{GroundingKey: "true", "pin": "true"}})
	return append(out, msgs[at:]...)
}
