package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
)

// GroundingKey marks the message grounding injects: its Metadata holds
// GroundingKey: "true". The block carries text whoever wrote the retrieved
// sources controls, so the content detectors (security, pii,
// content_filter) read a message so marked as a document, as they read a
// tool result, wherever it is placed and whatever their `system` setting.
// The message is pinned too ("pin": "true"), so that compaction keeps it.
const GroundingKey = "grounding"

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

	mu sync.Mutex
	// runs holds each run's grounding (once per run, not every turn),
	// until the run ends.
	runs map[string]*groundOnce
}

// groundOnce is the grounding of one run or one turn, computed by its first
// model call; a failed one is tried again by the next call.
type groundOnce struct {
	mu    sync.Mutex
	done  bool
	block string
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
		return nil
	}
	gp := &groundingPlan{cfg: g, runs: map[string]*groundOnce{}}
	if r := g.Render; r != nil {
		t, err := grounding.Parse(r.Template)
		if err != nil {
			return fmt.Errorf("build grounding.render.template: %w", err)
		}
		gp.tpl, gp.maxTokens = t, int64(r.MaxTokens)
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
// renders the admitted ones with grounding.render (dropping the lowest
// scored until the block fits max_tokens) and, with record_grounding,
// appends one audit record saying what became of each item. It injects
// nothing: the chat calls of a pipeline with a Retriever do that by
// themselves. A plan without a grounding section admits and reports. An
// item whose admission fails is refused and the joined evaluation errors
// are returned with the result; a render or audit failure returns an
// error and no block.
func (pl *Pipeline) Ground(ctx context.Context, query string, items []Item) (Grounded, error) {
	g := Grounded{Query: query, Prompt: []Item{}}
	gp := pl.grounding
	admitted := make([]grounding.Item, 0, len(items))
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
	}
	for _, it := range dropped {
		g.Dropped = append(g.Dropped, items[it.Index])
	}
	if gp != nil && gp.sink != nil {
		if err := gp.sink.Append(ctx, pl.groundingRecord(ctx, &g, items, kept, dropped, why)); err != nil {
			return Grounded{}, &CallError{Layer: LayerGrounding, Kind: KindPermanent, Message: "record grounding: " + err.Error()}
		}
	}
	return g, admitErr
}

// groundingRecord is the audit record of one grounding: an outcome record
// of stage admit and layer grounding whose Args hold the query, the
// block's estimate and budget, and every retrieved item's index, id,
// source, score and outcome, with the reason of a refusal that has one.
func (pl *Pipeline) groundingRecord(ctx context.Context, g *Grounded, items []Item, kept, dropped []grounding.Item, why map[int]string) AuditRecord {
	outcome := make([]string, len(items))
	for i := range outcome {
		outcome[i] = GroundedRefused
	}
	for _, it := range kept {
		outcome[it.Index] = GroundedPrompt
	}
	for _, it := range dropped {
		outcome[it.Index] = GroundedBudget
	}
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
	if r, ok := ctx.Value(runKey{}).(*Run); ok {
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
// (or turn, with reground_every_turn) on its first model call, and injects
// the block into c's request. A retrieval or render failure fails the call
// before any layer sees it.
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
	if !once.done {
		items, err := pl.deps.Retriever.Retrieve(ctx, RetrievalQuery{Text: query, Run: c.Meta.Run})
		if err != nil {
			once.mu.Unlock()
			return fmt.Errorf("grounding: retrieve: %w", err)
		}
		g, err := pl.Ground(ctx, query, items)
		var ce *CallError
		if errors.As(err, &ce) && ce.Layer == LayerGrounding {
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
		once.block, once.done = g.Block, true
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
func injectBlock(msgs []Message, block, placement string) []Message {
	at := -1
	role := "system"
	if placement == plan.PlacementBeforeLastUser {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "user" {
				at, role = i, "user"
				break
			}
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
