package compiler

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// predicateFields lists, per kind, the config fields that hold CEL
// predicates. They are compiled by compile-cel and carried in
// Layer.Predicates.
var predicateFields = map[string][]string{
	"guard": {"deny", "require"},
}

// lower writes the plan.
func lower(_ context.Context, c *Compilation) error {
	p := c.Policy
	out := &plan.Plan{Version: plan.Version, Policy: p.Package,
		Settings: plan.Settings{AllowUndeclaredTools: p.AllowUndeclaredTools, DigestKeyEnv: p.DigestKeyEnv}}
	if p.RunIdle != "" && p.RunIdle != plan.DefaultRunIdle {
		out.Settings.RunIdle = p.RunIdle
	}
	if p.MaxAnswerBytes != 0 && p.MaxAnswerBytes != plan.DefaultMaxAnswerBytes {
		out.Settings.MaxAnswerBytes = p.MaxAnswerBytes
	}
	if len(p.Models) > 0 {
		out.Models = map[string]plan.Model{}
		for name, m := range p.Models {
			out.Models[name] = plan.Model{USDPerMTokIn: m.USDPerMTokIn, USDPerMTokOut: m.USDPerMTokOut,
				USDPerMTokCached: m.USDPerMTokCached, USDPerMTokCacheWrite: m.USDPerMTokCacheWrite, USDPerMTokCacheWrite1h: m.USDPerMTokCacheWrite1h, LongContext: m.LongContext, ContextTokens: m.ContextTokens,
				Provider: m.Provider, ID: m.ID, APIKeyEnv: m.APIKeyEnv, BaseURL: m.BaseURL, MaxTokens: m.MaxTokens}
		}
	}
	if len(p.Tools) > 0 {
		out.Tools = map[string]plan.Tool{}
		for name, t := range p.Tools {
			out.Tools[name] = plan.Tool{SideEffecting: t.SideEffecting, RetrySafe: t.RetrySafe, Description: t.Description,
				URLArg: t.URLArg, PathArg: t.PathArg, URLArgs: several(t.URLArgs), PathArgs: several(t.PathArgs), Args: t.Args, ResultSchema: t.ResultSchema, SecretResult: t.SecretResult}
		}
	}
	if len(p.Stores) > 0 {
		out.Stores = map[string]plan.Store{}
		for name, s := range p.Stores {
			out.Stores[name] = plan.Store{Kind: s.Kind, Path: s.Path, URL: s.URL, URLEnv: s.URLEnv, Prefix: s.Prefix, Timeout: s.Timeout}
		}
	}
	lowerServe(p, out, c.planPos)
	c.lowerState(out)
	for _, stage := range dsl.Stages {
		var layers []plan.Layer
		for _, e := range p.Chains[stage] {
			layers = append(layers, c.lowerEntry(e))
		}
		switch stage {
		case plan.StageChat:
			out.Chains.Chat = layers
		case plan.StageTool:
			out.Chains.Tool = layers
		case plan.StageTurn:
			out.Chains.Turn = layers
		}
	}
	if p.Admit != nil {
		out.Admit = c.predicate(p.Admit, plan.StageAdmit, "", nil)
	}
	if g := p.Grounding; g != nil {
		out.Grounding = &plan.Grounding{Record: g.Record, Sink: g.Sink, EveryTurn: g.EveryTurn}
		if g.Template != nil {
			out.Grounding.Render = &plan.GroundingRender{Template: g.Template.Source, MaxTokens: g.MaxTokens, Placement: g.Placement}
		}
	}
	if in := p.Invariants; in != nil {
		out.Invariants = &plan.Invariants{Off: in.Off}
		if len(in.MaxExecutions) > 0 {
			out.Invariants.MaxExecutions = in.MaxExecutions
		}
		if len(in.Custom) > 0 {
			out.Invariants.Custom = map[string]plan.Invariant{}
			for name, x := range in.Custom {
				out.Invariants.Custom[name] = plan.Invariant{Expr: x.Source, Pos: c.planPos(x.Pos)}
			}
		}
	}
	c.Plan = out
	return nil
}

func (c *Compilation) lowerEntry(e *dsl.Entry) plan.Layer {
	l := plan.Layer{Use: e.Use, Name: e.Name, Tools: e.Tools, Pos: c.planPos(e.Pos)}
	cfg := e.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	l.Config = cfg
	phase := "before"
	if ph, ok := e.Fields["phase"].(string); ok {
		phase = ph
	}
	if e.When != nil {
		l.When = c.predicate(e.When, e.Stage, "before", e.Tools)
	}
	fields := predicateFields[e.Use]
	sort.Strings(fields)
	for _, f := range fields {
		x := e.Expr(f)
		if x == nil {
			continue
		}
		if l.Predicates == nil {
			l.Predicates = map[string]*plan.Predicate{}
		}
		pr := c.predicate(x, e.Stage, phase, e.Tools)
		if !slices.Equal(pr.Tools, e.Tools) {
			// A layer's predicates name the layer's tools (the plan
			// checks it); a tool without a schema leaves args untyped.
			cp := *pr
			cp.Tools = e.Tools
			pr = &cp
		}
		l.Predicates[f] = pr
	}
	return l
}

// planPos renders a position for the plan relative to the policy's
// directory, so that the plan does not depend on where it was built from.
func (c *Compilation) planPos(p dsl.Pos) string {
	if c.Policy != nil && p.File != "" {
		if rel, err := filepath.Rel(c.Policy.Dir, p.File); err == nil && !strings.HasPrefix(rel, "..") {
			p.File = filepath.ToSlash(rel)
		}
	}
	return p.String()
}

// predicate returns the checked predicate of x, or an unchecked one when
// compile-cel has not produced it.
func (c *Compilation) predicate(x *dsl.Expr, stage, phase string, tools []string) *plan.Predicate {
	p, ok := c.checkedPredicate(x)
	if !ok {
		p = &plan.Predicate{Stage: stage, Phase: phase, Source: x.Source, Tools: tools}
	}
	return c.withNamePos(p, x)
}

// withNamePos returns p, a tool-stage predicate of x, with the positions
// of the strings it tests tool.name with (plan.Predicate.NamePos), on a
// copy: what compile-cel made of x stays as it is.
func (c *Compilation) withNamePos(p *plan.Predicate, x *dsl.Expr) *plan.Predicate {
	if p.Stage != string(plan.StageTool) {
		return p
	}
	tests := predicate.NameTests(x.Source)
	if len(tests) == 0 {
		return p
	}
	cp := *p
	cp.NamePos = map[string]string{}
	for _, nt := range tests {
		if _, seen := cp.NamePos[nt.Value]; !seen {
			cp.NamePos[nt.Value] = c.planPos(x.PosAt(nt.Offset))
		}
	}
	return &cp
}

// checkedPredicate returns what compile-cel made of x. An entry's config
// field (a guard's deny) is a new *dsl.Expr each time it is read, so it is
// found by its place and source: lowered as written, it would lose the
// policy's cel_cost_limit and what its `when` proves present, and the
// runtime would refuse a predicate vet accepted.
func (c *Compilation) checkedPredicate(x *dsl.Expr) (*plan.Predicate, bool) {
	if p, ok := c.Predicates[x]; ok {
		return p, true
	}
	if c.byPlace == nil || c.indexed != len(c.Predicates) {
		c.byPlace, c.indexed = make(map[exprPlace]*plan.Predicate, len(c.Predicates)), len(c.Predicates)
		for y, p := range c.Predicates {
			c.byPlace[exprPlace{y.Pos, y.Source}] = p
		}
	}
	p, ok := c.byPlace[exprPlace{x.Pos, x.Source}]
	return p, ok
}

// several returns refs when it holds more than one reference, else nil (the
// one reference is in url_arg or path_arg).
func several(refs []string) []string {
	if len(refs) > 1 {
		return refs
	}
	return nil
}
