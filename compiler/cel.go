package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/prove/invariant"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// compileCEL parses and type-checks every predicate of the policy (admit,
// the state handlers' deny and set, each entry's when, each guard's deny or
// require) in the environment of its
// stage and phase, with args typed from the schemas of the tools the entry
// is scoped to. Issues are placed inside the CUE string at the offending
// token.
func compileCEL(_ context.Context, c *Compilation) error {
	c.checkCEL(nil)
	return nil
}

// checkCEL checks the predicates of c.Policy, all of them when b is nil,
// else those that b lets be checked.
func (c *Compilation) checkCEL(b *broken) {
	p := c.Policy
	if p.Admit != nil && (b == nil || !b.all && !b.admit) {
		c.checkPredicate(p.Admit, predicate.Admit, predicate.Before, nil, "", "admit", "", nil, nil)
	}
	// An invariant reads the names of the models and tools.
	if p.Invariants != nil && (b == nil || !b.all && !b.invariants && !b.modelList && !b.toolList) {
		for _, name := range sortedNames(p.Invariants.Custom) {
			c.checkInvariant(p.Invariants.Custom[name])
		}
	}
	if b == nil || !b.all && !b.state {
		c.checkState()
	}
	for _, stage := range dsl.Stages {
		for _, e := range p.Chains[stage] {
			if b != nil && !b.entry(e) {
				continue
			}
			// The layer's predicates run only where its when holds:
			// what when tests present needs no test of their own.
			var given []string
			if e.When != nil {
				if w := c.checkPredicate(e.When, predicate.Stage(stage), predicate.Before, e.Tools, "when", "when", "", nil, nil); w != nil {
					given = w.PresentIfTrue()
				}
			}
			phase := predicate.Before
			if ph, ok := e.Fields["phase"].(string); ok && ph != "" {
				phase = predicate.Phase(ph)
			}
			for _, f := range predicateFields[e.Use] {
				if x := e.Expr(f); x != nil {
					onError, _ := e.Fields["on_error"].(string)
					c.checkPredicate(x, predicate.Stage(stage), phase, e.Tools, e.Use, f, onError, given, e.When)
				}
			}
		}
	}
}

// argsSchemas returns the argument schemas of the scoped tools, or nil (args
// untyped) when the entry is unscoped or a scoped tool declares no schema.
func (c *Compilation) argsSchemas(tools []string) []json.RawMessage {
	if len(tools) == 0 {
		return nil
	}
	var out []json.RawMessage
	for _, name := range tools {
		t, ok := c.Policy.Tools[name]
		if !ok || len(t.Args) == 0 {
			return nil
		}
		out = append(out, t.Args)
	}
	return out
}

// afterVars are the variables of each stage that exist only once the call
// has returned (phase "after").
var afterVars = map[predicate.Stage][]string{
	predicate.Chat: {"response"},
	predicate.Tool: {"result"},
	predicate.Turn: {"output", "status"},
}

// phaseHint explains an undeclared reference to a variable that exists
// only after the call, for a predicate of the given kind ("when", or the
// builtin whose field it is).
func phaseHint(msg string, stage predicate.Stage, phase predicate.Phase, kind string) string {
	if phase != predicate.Before {
		return ""
	}
	for _, v := range afterVars[stage] {
		if msg != "undeclared reference to '"+v+"'" {
			continue
		}
		if kind == "guard" {
			return fmt.Sprintf(": %s is set only after the call; give the guard phase: \"after\" to check it", v)
		}
		if kind == "when" {
			return fmt.Sprintf(": %s is set only after the call, and when decides before it whether the layer runs", v)
		}
		return fmt.Sprintf(": %s is set only after the call", v)
	}
	return ""
}

// referenceHint names the variable closest to an undeclared reference
// ("arg": did you mean args?), "" when none is close.
func referenceHint(msg string, names []string) string {
	name, ok := strings.CutPrefix(msg, "undeclared reference to '")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "'")
	if best := textdist.Closest(name, names); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return ""
}

// stageHint explains an undeclared reference to a variable of another
// stage (args in a chat guard, request in a tool one) by listing the
// variables of the predicate's own stage.
func stageHint(msg string, stage predicate.Stage) string {
	name, ok := strings.CutPrefix(msg, "undeclared reference to '")
	if !ok {
		return ""
	}
	name = strings.TrimSuffix(name, "'")
	var own, before, after, others []string
	for _, v := range predicate.Variables(stage) {
		own = append(own, v.Name)
		if v.AfterOnly {
			after = append(after, v.Name)
		} else {
			before = append(before, v.Name)
		}
	}
	for _, s := range []predicate.Stage{predicate.Chat, predicate.Tool, predicate.Turn, predicate.Admit, predicate.State} {
		if s == stage {
			continue
		}
		for _, v := range predicate.Variables(s) {
			if v.Name == name {
				others = append(others, string(s))
			}
		}
	}
	if len(others) == 0 || slices.Contains(own, name) {
		return ""
	}
	where := "the " + strings.Join(others, " and ") + " stage"
	if len(others) > 1 {
		where += "s"
	}
	reads := strings.Join(before, ", ")
	if len(after) > 0 {
		reads += " and, after the call, " + strings.Join(after, ", ")
	}
	return fmt.Sprintf(": %s is a variable of %s; a %s predicate reads %s", name, where, stage, reads)
}

// costHint is what the policy can do about an estimate over the limit: in
// the chat stage, a regular expression over the messages belongs in the
// content_filter builtin, whose patterns scan every message outside CEL;
// anywhere, the limit is settings.cel_cost_limit. An unbounded estimate
// gets nothing: no limit admits it.
func costHint(msg string, stage predicate.Stage) string {
	if !strings.Contains(msg, "exceeds the limit") {
		return ""
	}
	h := ""
	if stage == predicate.Chat && strings.Contains(msg, "matches()") {
		h = "; content_filter's patterns match every message the model reads with no cost limit"
	}
	if strings.Contains(msg+h, "; ") {
		return h + "; or raise settings.cel_cost_limit"
	}
	return h + "; raise settings.cel_cost_limit"
}

// checkPredicate checks one predicate of an entry (kind names its builtin,
// or is "when"; field is the config field holding it, onError the entry's
// on_error, when the entry's when, which the runtime evaluates first) or
// the policy's admit (kind "", field "admit").
func (c *Compilation) checkPredicate(x *dsl.Expr, stage predicate.Stage, phase predicate.Phase, tools []string, kind, field, onError string, given []string, when *dsl.Expr) *predicate.Checked {
	var schemas []json.RawMessage
	if stage == predicate.Tool {
		schemas = c.argsSchemas(tools)
	}
	env, err := predicate.NewEnv(predicate.EnvConfig{Stage: stage, Phase: phase, ArgsSchemas: schemas, CostLimit: c.Policy.CELCostLimit})
	if err != nil {
		c.report(dsl.Errorf(x.Pos, predicate.RuleType, "%v", err))
		return nil
	}
	checked, issues := env.CheckGiven(x.Source, given)
	syntax := false
	for _, is := range issues {
		if is.Rule == predicate.RuleSyntax {
			// Later syntax errors are usually echoes of the first.
			if syntax {
				continue
			}
			syntax = true
		}
		msg := is.Message
		if at, h, ok := mismatchHint(x.Source, is.Offset, msg); ok && is.Rule == predicate.RuleType {
			is.Offset, msg = at, msg+h
		} else if is.Rule == predicate.RuleType {
			if h := phaseHint(msg, stage, phase, kind); h != "" {
				msg += h
			} else if h := stageHint(msg, stage); h != "" {
				msg += h
			} else if habitHint(x.Source, is.Offset, msg) == "" {
				var names []string
				for _, v := range predicate.Variables(stage) {
					names = append(names, v.Name)
				}
				msg += referenceHint(msg, names)
			}
		}
		if is.Rule == predicate.RuleCost {
			msg += costHint(msg, stage)
		}
		msg += habitHint(x.Source, is.Offset, msg)
		c.report(dsl.Errorf(x.PosAt(is.Offset), is.Rule, "%s", msg))
	}
	if checked == nil {
		return nil
	}
	c.checkOptionalKeys(x, checked, stage, tools, keyFailure(kind, field, onError))
	c.checkLiterals(x, stage, tools, checked.Reads, checked.Literals, field)
	c.checkLooseMatches(x, field, stage, tools)
	c.checkFoldedLiterals(x, field)
	c.checkValueTests(x, stage, tools, checked.Reads, field)
	if stage == predicate.Chat {
		c.checkToolCallArgs(x)
	}
	indexWhen := when
	if phase == predicate.After {
		indexWhen = nil
	}
	c.checkUncheckedIndexes(x, stage, tools, keyFailure(kind, field, onError), indexWhen)
	c.checkMetaKeys(x, stage)
	if stage == predicate.Tool {
		c.checkArgNumbers(x, tools, checked.Literals, field)
	}
	if stage == predicate.Tool && schemas != nil {
		c.checkMixedKindArgs(x, checked.Literals, tools)
	}
	if stage == predicate.Tool && (len(tools) == 0 && checked.ReadsUntypedArgs || schemas != nil) {
		c.checkUnscopedArgLiterals(x, checked.Literals, tools, keyFailure(kind, field, onError))
	}
	if stage == predicate.Tool && phase == predicate.After && slices.Contains(checked.Reads, "result") {
		c.checkResultReads(x, tools)
	}
	c.checkConstant(x, env, checked, kind, field)
	c.checkConstantUnderWhen(x, when, checked, phase, kind, field)
	if checked.ReadsUntypedArgs && len(tools) == 0 {
		undeclared := c.checkUndeclaredArgs(x, checked, keyFailure(kind, field, onError))
		if c.checkNarrowedArgs(x) || undeclared {
			return checked
		}
	}
	if checked.ReadsUntypedArgs && len(tools) == 0 {
		c.checkUnscopedArgKeys(x, checked, keyFailure(kind, field, onError), when)
	}
	if checked.ReadsUntypedArgs {
		at := identOffset(x.Source, "args")
		why := "no tool schema types it"
		if len(tools) == 0 {
			why = "the entry is not scoped to tools with schemas (add tools: [...])"
		}
		c.report(dsl.Warnf(x.PosAt(at), predicate.RuleUntypedArgs, "predicate reads args, but %s: typos in field names are not caught", why))
	} else if len(checked.UntypedArgReads) > 0 {
		r := checked.UntypedArgReads[0]
		c.report(dsl.Warnf(x.PosAt(r.Offset), predicate.RuleUntypedArgs,
			"predicate reads %s.%s, but no tool schema types it: the args schema of %s leaves %s untyped (an object without properties, or a value without a type): typos in field names are not caught, and a field may hold a value of any type (the string \"true\" is not true); declare its properties",
			r.Map, r.Key, "`"+strings.Join(tools, "`, `")+"`", r.Map))
	}
	pt := tools
	if schemas == nil {
		pt = nil
	}
	c.Predicates[x] = &plan.Predicate{Stage: string(stage), Phase: string(phase), Source: x.Source, Tools: pt, CostLimit: c.Policy.CELCostLimit, Given: given}
	if stage == predicate.Admit {
		c.Predicates[x].Phase = ""
	}
	return checked
}

// identOffset returns the byte offset of the first use of the identifier
// name in a CEL source, outside string literals and not part of a longer
// name or a field selection (0 when there is none).
func identOffset(src, name string) int {
	isIdent := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	var quote byte
	for i := 0; i < len(src); i++ {
		b := src[i]
		if quote != 0 {
			if b == '\\' {
				i++
			} else if b == quote {
				quote = 0
			}
			continue
		}
		if b == '"' || b == '\'' {
			quote = b
			continue
		}
		if strings.HasPrefix(src[i:], name) && (i == 0 || !isIdent(src[i-1]) && src[i-1] != '.') &&
			(i+len(name) == len(src) || !isIdent(src[i+len(name)])) {
			return i
		}
	}
	return 0
}

// checkInvariant parses and type-checks one of the policy's own invariants
// in the environment of the run's trace (agentc prove evaluates it).
func (c *Compilation) checkInvariant(x *dsl.Expr) {
	_, issues := invariant.Compile(x.Source)
	if len(issues) == 0 {
		c.checkInvariantReads(x)
	}
	for _, is := range issues {
		rule := predicate.RuleType
		if is.Syntax {
			rule = predicate.RuleSyntax
		}
		// The environment has no container: cel-go's note of it says
		// nothing to the policy's author.
		msg := strings.TrimSuffix(is.Message, " (in container '')")
		if !is.Syntax {
			var names []string
			for _, v := range invariant.Variables {
				names = append(names, v.Name)
			}
			msg += referenceHint(msg, names)
		}
		c.report(dsl.Errorf(x.PosAt(is.Offset), rule, "invariant: %s", msg))
		if is.Syntax {
			break // later syntax errors are usually echoes of the first
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ruleConstant reports a predicate that reads no variable and whose
// constant value leaves its layer inert.
const ruleConstant = "cel/constant"

// checkConstant reports a predicate that reads no variable of its stage, so
// that it has one value for every call, when that value makes the layer do
// nothing: a when that is always false (the layer never runs), a guard's
// deny that is always false or require that is always true (the guard
// never blocks), a state handler's deny that is always false (it never
// vetoes). A constant that blocks every call fails closed and is left
// alone.
func (c *Compilation) checkConstant(x *dsl.Expr, env *predicate.Env, checked *predicate.Checked, kind, field string) {
	vetoes := (kind == "guard" || kind == "state") && (field == "deny" || field == "require")
	if field != "when" && field != "admit" && !vetoes {
		return
	}
	if len(checked.Reads) > 0 {
		// A constant the predicate folds to and the one a status-only
		// turn predicate has are one finding; a dead never-matching term
		// is another, of its own, beside either.
		dead, at := c.checkDeadTerm(x, checked, kind, field)
		c.checkNeverMatchTerms(x, field, at)
		c.checkDeadSubterms(x, checked, field, at)
		if !dead {
			c.checkStatusOnly(x, env, checked, kind, field)
		}
		return
	}
	if field == "admit" {
		return
	}
	prog, err := env.Program(checked)
	if err != nil {
		return
	}
	v, err := prog.Eval(context.Background(), &predicate.ToolVars{})
	if err != nil {
		return
	}
	var what string
	switch {
	case field == "when" && !v:
		what = "when is always false: the layer never runs"
	case field == "deny" && !v && kind == "state":
		what = "deny is always false: the handler never vetoes"
	case field == "deny" && !v:
		what = "deny is always false: the guard never blocks"
	case field == "require" && v:
		what = "require is always true: the guard never blocks"
	default:
		return
	}
	c.report(dsl.Errorf(x.Pos, ruleConstant, "%s (the predicate reads no variable, so it has the same value for every call); write the condition over the call, or remove the entry", what))
}

// checkDeadTerm reports a predicate that reads variables and yet has one
// value for every call, as a term fixes it (x || true, x && false,
// x < 0.0 && x > 10.0, n >= 0 || n < 0 for an int n): the parts it reads
// are dead.
// A value that leaves the layer inert is an error; one that makes it act
// on every call (a when always true, a deny that blocks every call) a
// warning, since the policy still fails closed. Each term that decides it
// alone is a finding of its own (constantTerms). It reports whether it
// found one, and the byte offsets of the terms that decide it.
func (c *Compilation) checkDeadTerm(x *dsl.Expr, checked *predicate.Checked, kind, field string) (bool, []int) {
	var at []int
	for _, d := range constantTerms(x.Source, factsOf(checked)) {
		what, inert := constantOutcome(kind, field, d.value)
		diag := dsl.Errorf
		if !inert {
			diag = dsl.Warnf
		}
		c.report(diag(x.PosAt(d.offset), ruleConstant, "%s (%s, whatever its variables hold); fix the condition", what, d.why))
		at = append(at, d.offset)
	}
	return len(at) > 0, at
}

// constantOutcome says what a predicate of the layer field is in (kind
// names its builtin) does when it always has the value given, and whether
// that leaves the layer inert.
func constantOutcome(kind, field string, value bool) (what string, inert bool) {
	switch {
	case field == "when" && !value:
		return "when is always false: the layer never runs", true
	case field == "when":
		return "when is always true: the layer runs for every call, whatever the condition says", false
	case field == "admit" && value:
		return "admit is always true: every retrieved item is admitted", true
	case field == "admit":
		return "admit is always false: every retrieved item is dropped", false
	case field == "deny" && !value && kind == "state":
		return "deny is always false: the handler never vetoes", true
	case field == "deny" && !value:
		return "deny is always false: the guard never blocks", true
	case field == "deny" && kind == "state":
		return "deny is always true: the handler vetoes every value", false
	case field == "deny":
		return "deny is always true: the guard blocks every call it sees", false
	case field == "require" && value:
		return "require is always true: the guard never blocks", true
	}
	return "require is always false: the guard blocks every call it sees", false
}

// checkStatusOnly reports an after-phase turn guard that reads status and
// nothing else, and has the same value for each status it can see ("ok"
// and "failed": a turn that ended blocked, over budget or in doubt is
// returned without running it), as checkDeadTerm does: status != 'ok' &&
// status != 'failed', !(status in ['ok', 'failed']) or
// status.startsWith('block') never hold. A predicate that tests equality
// with a status it never sees is left to checkLiterals; one that tests
// inequality with it (status != ”) is not, since its outcome decides
// whether that fails closed.
func (c *Compilation) checkStatusOnly(x *dsl.Expr, env *predicate.Env, checked *predicate.Checked, kind, field string) {
	cfg := env.Config()
	if cfg.Stage != predicate.Turn || cfg.Phase != predicate.After || !slices.Equal(checked.Reads, []string{"status"}) {
		return
	}
	for _, l := range checked.Literals {
		if l.Path == "status" && l.IsString() && l.Op != "!=" && !slices.Contains(turnStatuses, l.Value) {
			return // checkLiterals names the status it never is
		}
	}
	prog, err := env.Program(checked)
	if err != nil {
		return
	}
	var first bool
	for i, s := range turnStatuses {
		v, err := prog.Eval(context.Background(), &predicate.TurnVars{HasOutput: true, Status: s})
		if err != nil || i > 0 && v != first {
			return
		}
		first = v
	}
	what, inert := constantOutcome(kind, field, first)
	diag := dsl.Errorf
	if !inert {
		diag = dsl.Warnf
	}
	c.report(diag(x.Pos, ruleConstant, "%s (it is %t for each status a turn guard sees, '%s'; a turn that ended blocked, over budget or in doubt is returned as it ended, without running the guard); fix the condition",
		what, first, strings.Join(turnStatuses, "' and '")))
}
