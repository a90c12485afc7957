package compiler

import (
	"encoding/json"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// stateShell returns the plan form of the policy's state fields without
// their handlers: what types the handlers' CEL.
func stateShell(s *dsl.State) *plan.State {
	out := &plan.State{Fields: map[string]plan.StateField{}, Queue: s.Queue}
	for name, f := range s.Fields {
		out.Fields[name] = plan.StateField{Schema: f.Schema, Secret: f.Secret}
	}
	return out
}

// checkState type-checks the deny and set expressions of every state
// handler: `value` is typed from the field's schema (its items for
// on_append), `state` from every field's, and a set must compute a value
// of the field's type.
func (c *Compilation) checkState() {
	s := c.Policy.State
	if s == nil {
		return
	}
	shell := stateShell(s)
	obj := shell.ObjectSchema()
	for _, name := range sortedNames(s.Fields) {
		f := s.Fields[name]
		pf := shell.Fields[name]
		for _, hs := range [][]*dsl.StateHandler{f.OnSet, f.OnAppend} {
			for _, h := range hs {
				vs := pf.ValueSchema(h.Op)
				if h.Deny != nil {
					c.checkStateExpr(h.Deny, h.Op, vs, obj, false)
				}
				if h.Set != nil {
					c.checkStateExpr(h.Set, h.Op, vs, obj, true)
				}
			}
		}
	}
}

// checkStateExpr checks one state expression and records its plan form.
func (c *Compilation) checkStateExpr(x *dsl.Expr, op string, valueSchema, stateSchema json.RawMessage, value bool) {
	env, err := predicate.NewEnv(predicate.EnvConfig{Stage: predicate.State, ValueSchema: valueSchema, StateSchema: stateSchema,
		Value: value, CostLimit: c.Policy.CELCostLimit})
	if err != nil {
		c.report(dsl.Errorf(x.Pos, predicate.RuleType, "%v", err))
		return
	}
	checked, issues := env.Check(x.Source)
	var names []string
	for _, v := range predicate.Variables(predicate.State) {
		names = append(names, v.Name)
	}
	for _, is := range issues {
		msg := is.Message
		if is.Rule == predicate.RuleType && habitHint(x.Source, is.Offset, msg) == "" {
			msg += referenceHint(msg, names)
		}
		if is.Rule == predicate.RuleCost {
			msg += costHint(msg, predicate.State)
		}
		msg += habitHint(x.Source, is.Offset, msg)
		c.report(dsl.Errorf(x.PosAt(is.Offset), is.Rule, "%s", msg))
		if is.Rule == predicate.RuleSyntax {
			break // later syntax errors are usually echoes of the first
		}
	}
	if checked == nil {
		return
	}
	field := "deny"
	if value {
		field = "set"
	}
	c.checkOptionalKeys(x, checked, predicate.State, nil, keyFailure("state", field, ""))
	if !value {
		c.checkConstant(x, env, checked, "state", "deny")
		c.stateValue = valueSchema
		c.checkLiterals(x, predicate.State, nil, checked.Reads, checked.Literals, "deny")
		c.checkArgNumbers(x, nil, checked.Literals, "deny")
		c.stateValue = nil
	}
	c.Predicates[x] = &plan.Predicate{Stage: plan.StageState, Phase: op, Source: x.Source, CostLimit: c.Policy.CELCostLimit}
}

// lowerState writes the plan's state section.
func (c *Compilation) lowerState(out *plan.Plan) {
	s := c.Policy.State
	if s == nil {
		return
	}
	ps := stateShell(s)
	if ps.Queue == plan.DefaultStateQueue {
		ps.Queue = 0
	}
	for name, f := range s.Fields {
		pf := ps.Fields[name]
		pf.Pos = c.planPos(f.Pos)
		pf.OnSet = c.lowerStateHandlers(f.OnSet)
		pf.OnAppend = c.lowerStateHandlers(f.OnAppend)
		for _, b := range f.Background {
			pf.Background = append(pf.Background, plan.StateSink{Sink: b.Sink, Store: b.Store, URL: b.URL, URLEnv: b.URLEnv, Pos: c.planPos(b.Pos)})
		}
		ps.Fields[name] = pf
	}
	out.State = ps
}

func (c *Compilation) lowerStateHandlers(hs []*dsl.StateHandler) []plan.StateHandler {
	var out []plan.StateHandler
	for _, h := range hs {
		ph := plan.StateHandler{Message: h.Message, Truncate: h.Truncate, Pos: c.planPos(h.Pos)}
		if h.Deny != nil {
			ph.Deny = c.statePredicate(h.Deny, h.Op)
		}
		if h.Set != nil {
			ph.Set = c.statePredicate(h.Set, h.Op)
		}
		if h.IsRedact {
			ph.Redact = &plan.StateRedact{Patterns: h.Redact, Replacement: h.Replacement}
		}
		out = append(out, ph)
	}
	return out
}

func (c *Compilation) statePredicate(x *dsl.Expr, op string) *plan.Predicate {
	if p, ok := c.checkedPredicate(x); ok {
		return p
	}
	return &plan.Predicate{Stage: plan.StageState, Phase: op, Source: x.Source}
}
