package meter

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "meter"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitRecords, runtime.TraitCountsTokens, runtime.TraitShortCircuits},
		Doc:    "records usage and cost and refuses calls once a budget ceiling is reached",
		New:    func() runtime.Middleware { return &Meter{Scope: "run"} },
	})
}

// Budget holds the ceilings; nil fields are unlimited.
type Budget struct {
	Tokens *int64   `json:"tokens,omitempty"`
	USD    *float64 `json:"usd,omitempty"`
	Calls  *int64   `json:"calls,omitempty"`
}

// Meter is the meter middleware; its exported fields are its config
// (schemas/meter.cue).
type Meter struct {
	Budget *Budget `json:"budget,omitempty"`
	Scope  string  `json:"scope"`

	name   string
	rates  map[string]plan.Model
	global ledger
	mu     sync.Mutex
	runs   map[string]*ledger
}

type ledger struct {
	mu sync.Mutex
	runtime.Ledger
	// pending counts the calls admitted by reserve and not yet settled.
	pending int64
}

// Provision records the model rates.
func (m *Meter) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.rates = b.Plan.Models
	m.runs = map[string]*ledger{}
	return nil
}

// Validate checks the scope.
func (m *Meter) Validate() error {
	if m.Scope != "run" && m.Scope != "global" {
		return fmt.Errorf(`scope must be "run" or "global", got %q`, m.Scope)
	}
	return nil
}

func (m *Meter) ledgerFor(run string) *ledger {
	if m.Scope == "global" {
		return &m.global
	}
	m.mu.Lock()
	l := m.runs[run]
	if l == nil {
		l = &ledger{}
		m.runs[run] = l
	}
	m.mu.Unlock()
	return l
}

// Ledger implements runtime.LedgerReader.
func (m *Meter) Ledger(runID string) runtime.Ledger {
	var l *ledger
	if m.Scope == "global" {
		l = &m.global
	} else {
		m.mu.Lock()
		l = m.runs[runID]
		m.mu.Unlock()
		if l == nil {
			return runtime.Ledger{}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Ledger
}

// Forget drops the ledger of a finished run (scope "run").
func (m *Meter) Forget(runID string) {
	m.mu.Lock()
	delete(m.runs, runID)
	m.mu.Unlock()
}

// EndRun implements runtime.RunEnder: it forgets the run's ledger.
func (m *Meter) EndRun(runID string) { m.Forget(runID) }

// reserve admits a call or refuses it with a *runtime.BudgetError, in one
// critical section of the ledger lock: the tokens and usd ceilings refuse
// once the charged amount has reached them; the calls ceiling refuses once
// the charged calls plus the calls admitted and still running have reached
// it. An admitted call is counted as pending until settle; it reports whether
// it reserved anything (without a budget there is nothing to reserve).
func (m *Meter) reserve(l *ledger) (bool, error) {
	b := m.Budget
	if b == nil {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.Ledger
	switch {
	case b.Tokens != nil && cur.Tokens() >= *b.Tokens:
		return false, &runtime.BudgetError{Layer: m.name, Resource: "tokens", Spent: float64(cur.Tokens()), Limit: float64(*b.Tokens)}
	case b.USD != nil && cur.USD >= *b.USD:
		return false, &runtime.BudgetError{Layer: m.name, Resource: "usd", Spent: cur.USD, Limit: *b.USD}
	case b.Calls != nil && cur.Calls+l.pending >= *b.Calls:
		return false, &runtime.BudgetError{Layer: m.name, Resource: "calls", Spent: float64(cur.Calls), Limit: float64(*b.Calls)}
	}
	l.pending++
	return true, nil
}

// settle releases a call's reservation (when reserved) and charges it
// (when charge): usage u at cost usd and one call.
func (m *Meter) settle(l *ledger, reserved, charge bool, u runtime.Usage, usd float64) {
	if !reserved && !charge {
		return
	}
	l.mu.Lock()
	if reserved {
		l.pending--
	}
	if charge {
		l.InputTokens += u.InputTokens
		l.OutputTokens += u.OutputTokens
		l.USD += usd
		l.Calls++
	}
	l.mu.Unlock()
}

// Cost returns the cost in US dollars of usage on model at the plan's rates
// (zero for an undeclared model). Cached input tokens are priced at the
// model's usd_per_mtok_cached when it declares one, else as input.
func (m *Meter) Cost(model string, u runtime.Usage) float64 {
	return Cost(m.rates[model], u)
}

// Cost returns the cost in US dollars of usage at the rates of r.
func Cost(r plan.Model, u runtime.Usage) float64 {
	in := float64(u.InputTokens) * r.USDPerMTokIn
	if r.USDPerMTokCached != nil {
		cached := float64(min(max(u.CachedInputTokens, 0), max(u.InputTokens, 0)))
		in += cached * (*r.USDPerMTokCached - r.USDPerMTokIn)
	}
	return (in + float64(u.OutputTokens)*r.USDPerMTokOut) / 1e6
}

// WrapChat implements runtime.ChatWrapper.
func (m *Meter) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		l := m.ledgerFor(c.Meta.Run.ID)
		reserved, err := m.reserve(l)
		if err != nil {
			return err
		}
		settled := false
		defer func() {
			if !settled { // next panicked: release the reservation
				m.settle(l, reserved, false, runtime.Usage{}, 0)
			}
		}()
		start, u0 := c.Deltas, c.Usage
		err = next(ctx, c, yield)
		settled = true
		if c.Meta.Cached || err != nil && c.Deltas == start && c.Usage == u0 {
			// A cached hit, or a pre-stream failure (nothing arrived): not charged.
			m.settle(l, reserved, false, runtime.Usage{}, 0)
			return err
		}
		u := c.Usage.Sub(u0)
		model := c.Served
		if model == "" {
			model = c.Request.Model
		}
		m.settle(l, reserved, true, u, m.Cost(model, u))
		return err
	}
}

// WrapTool implements runtime.ToolWrapper.
func (m *Meter) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		l := m.ledgerFor(c.Meta.Run.ID)
		reserved, err := m.reserve(l)
		if err != nil {
			return nil, err
		}
		settled := false
		defer func() {
			if !settled { // next panicked: release the reservation
				m.settle(l, reserved, false, runtime.Usage{}, 0)
			}
		}()
		v, err := next(ctx, c)
		settled = true
		m.settle(l, reserved, err == nil && !c.Meta.Cached, runtime.Usage{}, 0)
		return v, err
	}
}

var (
	_ runtime.LedgerReader = (*Meter)(nil)
	_ runtime.RunEnder     = (*Meter)(nil)
	_ runtime.ChatWrapper  = (*Meter)(nil)
	_ runtime.ToolWrapper  = (*Meter)(nil)
)
