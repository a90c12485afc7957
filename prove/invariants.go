package prove

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"

	"github.com/agentc-dev/agentc/prove/invariant"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// The built-in invariants.
const (
	MaxExecutions       = "max_executions"
	AuditComplete       = "audit_complete"
	BudgetOvershoot     = "budget_overshoot"
	NoEffectAfterBlock  = "no_effect_after_block"
	NoRetryAfterOutput  = "no_retry_after_output"
	NoPhantomEffect     = "no_phantom_effect"
	NoRetryAfterRefusal = "no_retry_after_refusal"
)

// Builtins lists the built-in invariants, each on unless the policy turns it
// off.
var Builtins = []string{MaxExecutions, AuditComplete, BudgetOvershoot, NoEffectAfterBlock, NoRetryAfterOutput, NoPhantomEffect, NoRetryAfterRefusal}

type violation struct {
	id, msg string
}

type customInvariant struct {
	id, pos, expr string
	prg           cel.Program
}

// invariants are the compiled invariants of a plan.
type invariants struct {
	off     map[string]bool
	maxExec map[string]int
	custom  []customInvariant
}

// compileInvariants compiles the plan's invariants; dir, the policy's
// directory, is joined to their positions (plan.PosIn).
func compileInvariants(p *plan.Plan, dir string) (*invariants, error) {
	in := &invariants{off: map[string]bool{}, maxExec: map[string]int{}}
	if p.Invariants == nil {
		return in, nil
	}
	for _, id := range p.Invariants.Off {
		if !slices.Contains(Builtins, id) {
			return nil, fmt.Errorf("prove: invariants: %q is not a built-in invariant (%s)", id, strings.Join(Builtins, ", "))
		}
		in.off[id] = true
	}
	for k, v := range p.Invariants.MaxExecutions {
		in.maxExec[k] = v
	}
	for _, id := range sortedKeys(p.Invariants.Custom) {
		c := p.Invariants.Custom[id]
		pos := plan.PosIn(dir, c.Pos)
		prg, iss := invariant.Compile(c.Expr)
		if len(iss) > 0 {
			return nil, fmt.Errorf("prove: %s: invariant %s: %s", pos, id, iss[0].Message)
		}
		in.custom = append(in.custom, customInvariant{id: id, pos: pos, expr: c.Expr, prg: prg})
	}
	return in, nil
}

// check returns the invariants the run violates.
func (in *invariants) check(e *explorer, t target, o *outcome) []violation {
	var out []violation
	add := func(id string, vs ...string) {
		if !in.off[id] {
			for _, msg := range vs {
				out = append(out, violation{id, msg})
			}
		}
	}
	add(MaxExecutions, in.maxExecutions(e, t, o)...)
	add(AuditComplete, auditComplete(e, t, o)...)
	add(BudgetOvershoot, budgetOvershoot(e, o)...)
	add(NoEffectAfterBlock, noEffectAfterBlock(e, o)...)
	add(NoRetryAfterOutput, noRetryAfterOutput(o)...)
	add(NoPhantomEffect, noPhantomEffect(e, t, o)...)
	add(NoRetryAfterRefusal, noRetryAfterRefusal(e, o)...)
	out = append(out, in.customs(t, o)...)
	return out
}

// leaves returns the paths of the calls a run made (the steps, and the
// copies of a parallel step) with their results.
func leaves(steps []scenario.StepResult, prefix string, out map[string]scenario.StepResult) {
	for i, s := range steps {
		path := prefix + strconv.Itoa(i)
		if s.Stage == "parallel" {
			leaves(s.Nested, path+"/", out)
			continue
		}
		out[path] = s
	}
}

func (o *outcome) calls() map[string]scenario.StepResult {
	out := map[string]scenario.StepResult{}
	leaves(o.res.Steps, "", out)
	return out
}

func sortedPaths(m map[string]scenario.StepResult) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func appliesTo(l plan.Layer, tool string) bool {
	return len(l.Tools) == 0 || slices.Contains(l.Tools, tool)
}

func (in *invariants) maxExecutions(e *explorer, t target, o *outcome) []string {
	if t.stage != plan.StageTool {
		return nil
	}
	decl := e.orig.Tools[t.name]
	limit, set := in.maxExec[t.name]
	why := "set in invariants.max_executions"
	if !set {
		if !decl.SideEffecting || decl.RetrySafe {
			return nil
		}
		limit, why = 1, "side-effecting and not retry_safe"
	}
	// One logical call per step; an idempotent layer makes every call with
	// the same arguments in a run one logical call: each call of the tool
	// when the layer has no `when`, the calls its scope probe saw (those
	// its `when` held for) when it has one.
	dedupesAll := false
	scoped := map[int]bool{}
	for i, l := range e.orig.Chains.Tool {
		if l.Use == "idempotent" && appliesTo(l, t.name) {
			if l.When == nil {
				dedupesAll = true
			} else {
				scoped[i] = true
			}
		}
	}
	deduped := map[string]bool{}
	for _, ev := range o.events {
		if ev.Kind == evScopeIn && ev.Stage == plan.StageTool && scoped[ev.Pos] {
			deduped[ev.Step] = true
		}
	}
	dedupes := func(step string) bool { return dedupesAll || deduped[step] }
	// With one, a call that failed with an error saying its effect did not
	// stand (the layer stores no failure: a call sent again runs, as it
	// would without the layer) is a logical call of its own.
	calls := o.calls()
	counts := map[string]int{}
	for _, ev := range o.events {
		if ev.Kind == evExecute && ev.Stage == plan.StageTool && ev.Name == t.name {
			// Without an idempotent layer each call (each concurrent copy
			// too) is a logical call of its own.
			counts[ev.Step]++
			if dedupes(ev.Step) && !failedWithoutEffect(calls[ev.Step]) {
				counts["run"]++
			}
		}
	}
	var out []string
	for _, key := range sortedKeys(counts) {
		if n := counts[key]; n > limit {
			scope := "step " + key
			if key == "run" {
				scope = "the run (one logical call: the idempotent layer dedupes these arguments)"
			}
			out = append(out, fmt.Sprintf("tool %s ran %d times for one logical call in %s; at most %d (%s)", t.name, n, scope, limit, why))
		}
	}
	return out
}

// failedWithoutEffect reports a call that failed with an error that says
// the tool's effect did not stand: transient, rate limited, permanent, or
// refused before it ran. A timeout, a crash, a block (a result blocked after
// the tool ran) or a call in doubt may have left an effect.
func failedWithoutEffect(c scenario.StepResult) bool {
	if c.Outcome != "error" || c.Error == nil || c.Deduped != nil && *c.Deduped {
		return false
	}
	switch c.Error.Kind {
	case "transient", "rate_limited", "permanent", "breaker_open", "store_unavailable":
		return true
	}
	return false
}

func auditComplete(e *explorer, t target, o *outcome) []string {
	if t.stage != plan.StageTool {
		return nil
	}
	calls := o.calls()
	var out []string
	for i, l := range e.orig.Chains.Tool {
		if l.Use != "audit" || !appliesTo(l, t.name) {
			continue
		}
		name := layerName(l)
		var cfg struct {
			Trail string `json:"trail"`
		}
		_ = json.Unmarshal(l.Config, &cfg)
		if cfg.Trail == "" {
			cfg.Trail = "logical"
		}
		entered, intents, outcomes, execs := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
		for _, ev := range o.events {
			switch {
			case ev.Kind == evEnter && ev.Stage == plan.StageTool && ev.Pos == i:
				entered[ev.Step]++
			case ev.Kind == evRecord && ev.Name == name && ev.Record.Stage != plan.StageTurn:
				if ev.Record.Phase == runtime.PhaseIntent {
					intents[ev.Step]++
				} else {
					outcomes[ev.Step]++
				}
			case ev.Kind == evExecute && ev.Stage == plan.StageTool:
				execs[ev.Step]++
			}
		}
		for _, path := range sortedPaths(calls) {
			if entered[path] == 0 {
				continue
			}
			// Once the process crashed, every call in flight died with it.
			crashed := o.res.Crashed
			switch {
			case crashed && execs[path] > 0 && intents[path] == 0:
				out = append(out, fmt.Sprintf("step %s: tool %s ran and the process crashed with no intent record of audit layer %s", path, t.name, name))
			case crashed:
			case cfg.Trail == "logical" && outcomes[path] != 1:
				out = append(out, fmt.Sprintf("step %s: audit layer %s (trail logical) wrote %d outcome records for one logical call of %s; want exactly 1", path, name, outcomes[path], t.name))
			case cfg.Trail == "attempts" && outcomes[path] < execs[path]:
				out = append(out, fmt.Sprintf("step %s: audit layer %s (trail attempts) wrote %d outcome records for %d executions of %s; want one per attempt", path, name, outcomes[path], execs[path], t.name))
			}
		}
	}
	return out
}

func layerName(l plan.Layer) string {
	if l.Name != "" {
		return l.Name
	}
	return l.Use
}

// oneCall returns the most one call through the chat layer at pos was
// charged in the run (the probe just inside it saw the usage arrive).
func (e *explorer) oneCall(o *outcome, pos int) (usd float64, tokens int64) {
	for _, ev := range o.events {
		if ev.Kind != evExit || ev.Stage != plan.StageChat || ev.Pos != pos+1 {
			continue
		}
		usd = math.Max(usd, costOf(e.orig.Models[ev.Model], ev.Usage))
		tokens = max(tokens, ev.Usage.InputTokens+ev.Usage.OutputTokens)
	}
	return usd, tokens
}

// costOf returns what usage u costs on model m, as the meter prices the
// input and output prove scripts: at the prices of m's long-context tier
// when the input is above its threshold.
func costOf(m plan.Model, u runtime.Usage) float64 {
	m = m.Rates(u.InputTokens)
	return (float64(u.InputTokens)*m.USDPerMTokIn + float64(u.OutputTokens)*m.USDPerMTokOut) / 1e6
}

// budgetOvershoot: a meter refuses calls once its ledger has reached a
// ceiling, and the call that crosses it is charged in full; so the ledger
// never ends more than the largest single call through the meter over the
// ceiling, unless calls the meter admitted were charged together (a hedge
// outside the meter, a meter that admits a call past its ceiling).
//
// What the providers bill is checked too, against every chat ceiling in
// dollars or tokens: every model call the chain sent (the calls through the
// meter, a judge's verdicts and compaction's summaries, each retried or
// fallen-back attempt, a hedge's racers), each billed the usage it reported,
// or its input when it was cancelled after it started (a hedge's racer that
// lost, an attempt that timed out). Every such call runs for a call that
// passed the meter: either through it, or as the own call of a layer inside
// it (which goes down the chain below that layer, past the meter). So when
// the bill passes a ceiling by more than one call and the meter charged
// less than was billed, the budget did not bound what was spent: a layer
// dropped usage before the meter saw it, or made calls below it. A meter
// with `when` is compared with the calls made while a call it applies to
// was inside it; one with a `window` only over a run within one window.
func budgetOvershoot(e *explorer, o *outcome) []string {
	var out []string
	for _, l := range o.ledgers {
		b, g := l.budget, l.ledger
		usd, tokens := e.oneCall(o, l.pos)
		var bill bill
		billed := l.stage == plan.StageChat && e.billedCovers(o, l.pos)
		if billed {
			bill = e.billed(o, l.pos)
		}
		// One call over the ceiling: the largest the meter charged, or the
		// largest a provider billed.
		oneUSD, oneTokens := math.Max(usd, bill.maxUSD), max(tokens, bill.maxTokens)
		switch {
		case b.USD != nil && l.stage == plan.StageChat && g.USD > *b.USD+usd+1e-9:
			out = append(out, fmt.Sprintf("%s meter %s charged $%.6g against a budget of $%g: more than its largest call ($%.6g) over it", l.stage, l.layer, g.USD, *b.USD, usd))
		case b.Tokens != nil && l.stage == plan.StageChat && g.Tokens() > *b.Tokens+tokens:
			out = append(out, fmt.Sprintf("%s meter %s charged %d tokens against a budget of %d: more than its largest call (%d tokens) over it", l.stage, l.layer, g.Tokens(), *b.Tokens, tokens))
		case b.Calls != nil && g.Calls > *b.Calls:
			out = append(out, fmt.Sprintf("%s meter %s charged %d calls against a budget of %d", l.stage, l.layer, g.Calls, *b.Calls))
		case billed && b.USD != nil && bill.usd > *b.USD+oneUSD+1e-9 && bill.usd > g.USD+1e-9:
			out = append(out, fmt.Sprintf("%s meter %s: the models billed $%.6g for %d calls against a budget of $%g, more than one call ($%.6g) over it; the meter charged $%.6g for %d: %s", l.stage, l.layer, bill.usd, bill.calls, *b.USD, oneUSD, g.USD, g.Calls, bill.why()))
		case billed && b.Tokens != nil && bill.tokens > *b.Tokens+oneTokens && bill.tokens > g.Tokens():
			out = append(out, fmt.Sprintf("%s meter %s: the models billed %d tokens for %d calls against a budget of %d, more than one call (%d tokens) over it; the meter charged %d for %d: %s", l.stage, l.layer, bill.tokens, bill.calls, *b.Tokens, oneTokens, g.Tokens(), g.Calls, bill.why()))
		}
	}
	return out
}

// billedCovers reports whether the bill of a run is compared against the
// chat meter at pos: a run that stayed within one of its windows.
func (e *explorer) billedCovers(o *outcome, pos int) bool {
	if pos < 0 || pos >= len(e.orig.Chains.Chat) {
		return false
	}
	var cfg struct {
		Window string `json:"window"`
	}
	_ = json.Unmarshal(e.orig.Chains.Chat[pos].Config, &cfg)
	return oneWindow(cfg.Window, scenario.Epoch, scenario.Epoch.Add(o.elapsed))
}

// oneWindow reports whether from and to fall in one window of a meter's
// window ("" none, "month", or whole seconds from the Unix epoch on, as the
// meter cuts them); a window that does not parse counts as crossed.
func oneWindow(window string, from, to time.Time) bool {
	switch window {
	case "":
		return true
	case "month":
		from, to = from.UTC(), to.UTC()
		return from.Year() == to.Year() && from.Month() == to.Month()
	}
	d, err := time.ParseDuration(window)
	secs := int64(d / time.Second)
	if err != nil || secs <= 0 {
		return false
	}
	floor := func(t time.Time) int64 { s := t.Unix(); return s - ((s%secs)+secs)%secs }
	return floor(from) == floor(to)
}

// bill is what the providers bill for a run's model calls.
type bill struct {
	usd              float64
	tokens           int64
	calls, cancelled int
	maxUSD           float64
	maxTokens        int64
}

// why says where a bill the meter did not charge may come from.
func (b bill) why() string {
	if b.cancelled > 0 {
		return fmt.Sprintf("of the model calls billed (%d of them cancelled after they started, billed their input), some were not charged: a layer dropped their usage before the meter, or made them below it", b.cancelled)
	}
	return "of the model calls billed, some were not charged: a layer inside the meter made them below it (a judge's verdicts, a compaction's summaries), or dropped their usage before the meter"
}

// billed returns what the providers bill for the model calls the chat
// chain sent in a run for the calls the meter at pos applies to: the usage
// that arrived from each, and the input of each call cancelled after it
// started. A meter with `when` applies to the calls its scope probe saw
// (probed), and covers the model calls made while one of them was inside
// it; a meter without one applies to every call.
func (e *explorer) billed(o *outcome, pos int) bill {
	var b bill
	model := len(e.orig.Chains.Chat)
	scoped := pos >= 0 && pos < model && e.orig.Chains.Chat[pos].When != nil
	inside := 0
	for _, ev := range o.events {
		switch {
		case ev.Kind == evScopeIn && ev.Stage == plan.StageChat && ev.Pos == pos:
			inside++
		case ev.Kind == evScopeOut && ev.Stage == plan.StageChat && ev.Pos == pos:
			inside--
		}
		if ev.Kind != evExit || ev.Stage != plan.StageChat || ev.Pos != model || scoped && inside <= 0 {
			continue
		}
		u := ev.Usage
		if ev.ErrKind == "canceled" {
			b.cancelled++
			if u.InputTokens == 0 && u.OutputTokens == 0 {
				u = runtime.Usage{InputTokens: e.usage.InputTokens}
			}
		} else if u.InputTokens == 0 && u.OutputTokens == 0 {
			continue
		}
		usd := costOf(e.orig.Models[ev.Model], u)
		b.calls++
		b.usd += usd
		b.tokens += u.InputTokens + u.OutputTokens
		b.maxUSD = math.Max(b.maxUSD, usd)
		b.maxTokens = max(b.maxTokens, u.InputTokens+u.OutputTokens)
	}
	return b
}

func chainOf(p *plan.Plan, stage plan.Stage) []plan.Layer {
	switch stage {
	case plan.StageChat:
		return p.Chains.Chat
	case plan.StageTool:
		return p.Chains.Tool
	}
	return p.Chains.Turn
}

// posName names the layer at a probe position.
func posName(p *plan.Plan, stage plan.Stage, pos int) string {
	chain := chainOf(p, stage)
	if pos >= len(chain) {
		if stage == plan.StageChat {
			return "the model"
		}
		return "the tool"
	}
	return fmt.Sprintf("layer %d (%s)", pos, layerName(chain[pos]))
}

func noEffectAfterBlock(e *explorer, o *outcome) []string {
	type block struct {
		stage plan.Stage
		pos   int
	}
	blocked := map[string]*block{}
	var out []string
	reported := map[string]bool{}
	for _, ev := range o.events {
		b := blocked[ev.Step]
		switch {
		case ev.Kind == evExit && ev.Class == runtime.ClassBlocked && b == nil:
			blocked[ev.Step] = &block{ev.Stage, ev.Pos}
		case b == nil || reported[ev.Step]:
		case ev.Kind == evEnter && ev.Stage == b.stage && ev.Pos > b.pos,
			ev.Kind == evExecute && ev.Stage == b.stage:
			what := posName(e.orig, ev.Stage, ev.Pos)
			if ev.Kind == evExecute {
				what = ev.Stage + " " + ev.Name
			}
			out = append(out, fmt.Sprintf("step %s: %s blocked the call, then %s ran", ev.Step, posName(e.orig, b.stage, b.pos), what))
			reported[ev.Step] = true
		}
	}
	return out
}

func noRetryAfterOutput(o *outcome) []string {
	delivered := map[string]bool{}
	var out []string
	for _, ev := range o.events {
		switch {
		case ev.Kind == evDelta:
			delivered[ev.Step] = true
		case ev.Kind == evExecute && ev.Stage == plan.StageChat && delivered[ev.Step] && !ev.Cancelled:
			out = append(out, fmt.Sprintf("step %s: model %s was invoked again after a delta reached the caller", ev.Step, ev.Name))
			delivered[ev.Step] = false
		}
	}
	return out
}

// noRetryAfterRefusal: a provider that refused a call (its key, its
// account, a model it does not know: runtime.ErrProviderRefused) refuses it
// again, so the next model a call runs after a refusal is another one (a
// fallback falls over) or none. A model run again after another one served
// in between (a retry outside a fallback re-asking after a failure of the
// other model's answer) is not a retry of the refusal.
func noRetryAfterRefusal(e *explorer, o *outcome) []string {
	model := len(e.orig.Chains.Chat)
	refused := map[string]string{} // step -> the model that refused it, until another model runs
	var out []string
	for _, ev := range o.events {
		switch {
		case ev.Kind == evExit && ev.Stage == plan.StageChat && ev.Pos == model && ev.Refused != "":
			refused[ev.Step] = ev.Refused
		case ev.Kind == evExecute && ev.Stage == plan.StageChat:
			if refused[ev.Step] == ev.Name {
				out = append(out, fmt.Sprintf("step %s: model %s was invoked again after its provider refused the call", ev.Step, ev.Name))
			}
			delete(refused, ev.Step)
		}
	}
	return out
}

func noPhantomEffect(e *explorer, t target, o *outcome) []string {
	if t.stage != plan.StageTool || !e.orig.Tools[t.name].SideEffecting {
		return nil
	}
	execs := map[string]int{}
	for _, ev := range o.events {
		if ev.Kind == evExecute && ev.Stage == plan.StageTool {
			execs[ev.Step]++
		}
	}
	calls := o.calls()
	var out []string
	for _, path := range sortedPaths(calls) {
		s := calls[path]
		if s.Outcome == "ok" && (s.Deduped == nil || !*s.Deduped) && execs[path] == 0 {
			out = append(out, fmt.Sprintf("step %s: side-effecting tool %s reported success without running and without being marked deduped (a cache served it)", path, t.name))
		}
	}
	return out
}

func (in *invariants) customs(t target, o *outcome) []violation {
	if len(in.custom) == 0 {
		return nil
	}
	raw, err := json.Marshal(o.res)
	if err != nil {
		return []violation{{"custom", err.Error()}}
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	vars := map[string]any{
		"steps": m["steps"], "executions": m["executions"], "audit": m["audit"], "meter": m["meter"],
		"crashed": o.res.Crashed, "target": map[string]string{"stage": t.stage, "name": t.name},
	}
	var out []violation
	for _, c := range in.custom {
		v, _, err := c.prg.Eval(vars)
		switch {
		case err != nil:
			out = append(out, violation{c.id, fmt.Sprintf("%s: evaluation failed: %v", c.pos, err)})
		case v.Value() != true:
			out = append(out, violation{c.id, fmt.Sprintf("%s: invariant %s is false: %s", c.pos, c.id, c.expr)})
		}
	}
	return out
}
