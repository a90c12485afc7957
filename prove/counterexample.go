package prove

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

func itoa(i int) string { return strconv.Itoa(i) }

// counterexample makes the violation of a run replayable: it drops the
// trailing steps the violation does not need and keeps the trace.
func (e *explorer) counterexample(ctx context.Context, t target, script []string, o *outcome, v violation) *Counterexample {
	best, bestV := o, v
	for n := 1; n < len(o.sc.Steps); n++ {
		sc := *o.sc
		sc.Steps = sc.Steps[:n]
		r, err := e.runScenario(ctx, t, script, &sc)
		if err != nil {
			break
		}
		if w, ok := e.violates(t, r, v.id); ok {
			best, bestV = r, w
			break
		}
	}
	served := best.consumed
	sc := *best.sc
	trimScripts(&sc, served)
	of := t.stage + " " + t.name
	if t.stage == plan.StageChat {
		of = t.stage // every model serves the same script
	}
	c := &Counterexample{Invariant: bestV.id, Message: bestV.msg, Target: t.label, Script: script[:min(served, len(script))],
		Copies: t.copies, Scenario: &sc, Trace: e.trace(best), of: of}
	if t.copies > 1 {
		// Concurrent copies race for the script's items: replay the
		// scenario with the copies in the other order explored to see
		// whether the violation needs this one.
		other := t
		other.together = !t.together
		r, err := e.runScenario(ctx, other, script, &sc)
		if err == nil {
			if _, ok := e.violates(t, r, v.id); !ok {
				c.Interleaving = true
			}
		}
	}
	return c
}

func (e *explorer) violates(t target, o *outcome, id string) (violation, bool) {
	for _, w := range e.inv.check(e, t, o) {
		if w.id == id {
			return w, true
		}
	}
	return violation{}, false
}

// trimScripts drops the script items no call reached and the models no call
// used.
func trimScripts(sc *scenario.Scenario, served int) {
	for name, items := range sc.Models {
		if served < len(items) {
			sc.Models[name] = items[:max(served, 0)]
		}
	}
	for name, items := range sc.Tools {
		if served < len(items) {
			sc.Tools[name] = items[:max(served, 0)]
		}
	}
}

// trace renders the events of a run, one line each.
func (e *explorer) trace(o *outcome) []string {
	var out []string
	// ran tells, per step, whether the model or tool ran since the call
	// reached it: a call that returns without running found its script
	// exhausted.
	ran := map[string]bool{}
	for _, ev := range o.events {
		var line string
		switch ev.Kind {
		case evScopeIn, evScopeOut:
			continue
		case evEnter:
			line = fmt.Sprintf("enter %s %s", ev.Stage, posName(e.orig, ev.Stage, ev.Pos))
			if ev.Pos == len(chainOf(e.orig, ev.Stage)) {
				ran[ev.Step] = false
			}
		case evExit:
			res := "ok"
			if ev.ErrKind != "" {
				res = ev.ErrKind
			}
			if ev.Refused != "" {
				res += " (the provider refused it)"
			}
			line = fmt.Sprintf("exit  %s %s: %s", ev.Stage, posName(e.orig, ev.Stage, ev.Pos), res)
			if ev.Pos == len(chainOf(e.orig, ev.Stage)) && !ran[ev.Step] {
				line += " (script exhausted: did not run)"
			}
		case evDelta:
			line = "delta reached the caller"
		case evExecute:
			ran[ev.Step] = true
			line = fmt.Sprintf("run   %s %s", ev.Stage, ev.Name)
			if ev.Cancelled {
				line += " (already cancelled)"
			}
		case evRecord:
			r := ev.Record
			line = fmt.Sprintf("audit %s %s", r.Layer, r.Phase)
			if r.Decision != "" {
				line += " " + string(r.Decision)
			}
			if r.Attempts > 0 {
				line += fmt.Sprintf(" attempts=%d", r.Attempts)
			}
		}
		out = append(out, fmt.Sprintf("step %-4s %s", ev.Step, line))
	}
	return out
}

// WriteText prints the counterexample for people: the invariant and how it
// was violated, the script, the trace, and the scenario that replays it.
func (c *Counterexample) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "violated %s: %s\n", c.Invariant, c.Message)
	if c.Interleaving {
		b.WriteString("  (the concurrent copies race: a replay shows it only when they interleave as here)\n")
	}
	fmt.Fprintf(&b, "  target: %s\n  script: %s (then: script exhausted, permanent)\n  trace:\n", c.Target, strings.Join(c.Script, ", "))
	for _, l := range c.Trace {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ScenarioJSON returns the scenario of the counterexample, indented, for
// agentc run.
func (c *Counterexample) ScenarioJSON() ([]byte, error) {
	b, err := json.MarshalIndent(c.Scenario, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// usageFor picks the usage of a scripted model response: 40% of the
// tightest chat budget on the dearest model (at the prices of its
// long-context tier when it is dearer), so that a few calls reach a
// ceiling and a double charge shows (two calls charged at once from 80%
// end 60% over the ceiling, more than the one call a meter may overshoot
// by); 100 tokens each way without one.
func usageFor(p *plan.Plan) runtime.Usage {
	var rate float64
	for _, m := range p.Models {
		rate = max(rate, m.USDPerMTokIn+m.USDPerMTokOut)
		if t := m.LongContext; t != nil {
			rate = max(rate, t.USDPerMTokIn+t.USDPerMTokOut)
		}
	}
	per := int64(100)
	first := true
	for _, l := range p.Chains.Chat {
		if l.Use != "meter" {
			continue
		}
		var cfg struct {
			Budget *budget `json:"budget"`
		}
		if json.Unmarshal(l.Config, &cfg) != nil || cfg.Budget == nil {
			continue
		}
		pick := func(n int64) {
			if n < 1 {
				n = 1
			}
			if first || n < per {
				per, first = n, false
			}
		}
		if b := cfg.Budget.USD; b != nil && rate > 0 {
			pick(int64(0.4 * *b * 1e6 / rate))
		}
		if b := cfg.Budget.Tokens; b != nil {
			pick(int64(0.2 * float64(*b)))
		}
	}
	return runtime.Usage{InputTokens: per, OutputTokens: per}
}

// argVariants returns the argument sets the tool name is called with: the
// required properties of its JSON Schema at small values that the schema
// and the layers checking arguments accept (argGen) and, when it has
// numbers, at large ones (which trips limits such as "amount > 100"); then,
// when it differs, the set of every string at "a", which a pattern, a
// format or a layer may refuse (the refusal is explored too). dns is the
// scenario's DNS stub for the URLs written.
func (e *explorer) argVariants(name string) (variants []map[string]any, dns map[string][]string) {
	schema := e.orig.Tools[name].Args
	g := newArgGen(e.orig, name, e.opts.Dir)
	small, numeric := g.args(schema, false)
	variants = []map[string]any{small}
	if numeric {
		large, _ := g.args(schema, true)
		variants = append(variants, large)
	}
	plain := plainArgs(schema)
	if !slices.ContainsFunc(variants, func(v map[string]any) bool { return sameArgs(v, plain) }) {
		variants = append(variants, plain)
	}
	return variants, g.dns(e.orig)
}

func sameArgs(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// plainArgs returns the required properties of a JSON Schema at small
// values, every string "a" whatever its constraints.
func plainArgs(schema json.RawMessage) map[string]any {
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return map[string]any{}
	}
	small := map[string]any{}
	for _, name := range s.Required {
		var ps struct {
			Type    any      `json:"type"`
			Minimum *float64 `json:"minimum"`
			Maximum *float64 `json:"maximum"`
			Enum    []any    `json:"enum"`
		}
		_ = json.Unmarshal(s.Properties[name], &ps)
		typ, _ := ps.Type.(string)
		if len(ps.Enum) > 0 {
			small[name] = ps.Enum[0]
			continue
		}
		switch typ {
		case "number", "integer":
			lo := 1.0
			if ps.Minimum != nil {
				lo = max(*ps.Minimum, 1)
			}
			if ps.Maximum != nil {
				lo = min(lo, *ps.Maximum)
			}
			small[name] = lo
		case "boolean":
			small[name] = true
		case "array":
			small[name] = []any{}
		case "object":
			small[name] = map[string]any{}
		default:
			small[name] = "a"
		}
	}
	return small
}

// Replay runs a counterexample's scenario through the plan's pipeline, as
// agentc run does but observed, and returns the ids of the invariants the
// run violates (sorted, each once): a counterexample replays when its
// invariant is among them.
func Replay(ctx context.Context, p *plan.Plan, sc *scenario.Scenario, opts Options) ([]string, error) {
	registerProbe()
	inv, err := compileInvariants(p, cmp.Or(opts.PosDir, opts.Dir))
	if err != nil {
		return nil, err
	}
	// The usage the explorer scripts: a cancelled call is billed its input.
	e := &explorer{orig: p, opts: opts, inv: inv, usage: usageFor(p), logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if e.p, err = instrument(p); err != nil {
		return nil, err
	}
	t, err := targetOf(sc)
	if err != nil {
		return nil, err
	}
	o, err := e.runScenario(ctx, t, nil, sc)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range inv.check(e, t, o) {
		if !slices.Contains(ids, v.id) {
			ids = append(ids, v.id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// targetOf returns what a counterexample's scenario calls: its first step's
// model or tool, with as many copies as the step delivers at once.
func targetOf(sc *scenario.Scenario) (target, error) {
	if len(sc.Steps) == 0 {
		return target{}, fmt.Errorf("prove: the scenario has no steps")
	}
	st, copies := sc.Steps[0], 1
	if len(st.Parallel) > 0 {
		st, copies = st.Parallel[0], len(st.Parallel)
	}
	switch {
	case st.Tool != nil:
		return target{stage: plan.StageTool, name: st.Tool.Name, args: st.Tool.Args, copies: copies, free: true, label: "tool " + st.Tool.Name}, nil
	case st.Chat != nil:
		return target{stage: plan.StageChat, name: st.Chat.Model, copies: copies, free: true, label: "chat " + st.Chat.Model}, nil
	}
	return target{}, fmt.Errorf("prove: the scenario's first step is neither a chat nor a tool call")
}
