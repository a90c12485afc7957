package compiler

import (
	"strconv"

	"cuelang.org/go/cue"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// broken is what a CEL predicate of a policy that loaded with errors may
// not be checked against: the parts of the policy whose value has an
// error, or in which one was reported. A predicate whose typing reads a
// broken part is skipped, so that no finding follows from what the policy
// does not yet say.
type broken struct {
	// all: an error outside the parts below (a misspelt top-level field,
	// which may be the tools or the models meant), or in settings, which
	// set the cost limit every predicate is checked against.
	all bool
	// entries holds the chain entries with an error, by stage and index
	// ("tool.2"); chains an error in chains outside every entry.
	entries map[string]bool
	chains  bool
	// tools holds the declared tools with an error; toolList an error
	// in tools outside every tool, or in mcp (whose servers' tools are
	// called too), which leaves the tools a call may name unknown.
	tools    map[string]bool
	toolList bool
	// models: a model has an error; modelList: the models section has
	// one outside every model.
	models, modelList        bool
	state, admit, invariants bool
}

// brokenParts finds the broken parts of p, a policy decoded partly, from
// its values and the errors reported so far.
func brokenParts(c *Compilation, p *dsl.Policy) *broken {
	b := &broken{entries: map[string]bool{}, tools: map[string]bool{}}
	faulty := func(path ...string) bool {
		sel := make([]cue.Selector, len(path))
		for i, s := range path {
			sel[i] = cue.Str(s)
		}
		v := p.Value.LookupPath(cue.MakePath(sel...))
		return v.Exists() && (v.Err() != nil || v.Validate(cue.Concrete(true)) != nil)
	}
	for _, stage := range dsl.Stages {
		for _, e := range p.Chains[stage] {
			if !e.WellTyped() {
				b.entries[entryKey(e.Stage, e.Index)] = true
			}
		}
	}
	for name := range p.Tools {
		if faulty("tools", name) {
			b.tools[name] = true
		}
	}
	for _, m := range p.Models {
		b.models = b.models || !m.WellTyped
	}
	b.all = faulty("settings")
	b.toolList = faulty("mcp")
	b.state = faulty("state")
	b.admit = faulty("admit")
	b.invariants = faulty("invariants")
	for _, d := range c.Diagnostics {
		if d.Severity == dsl.Error {
			b.place(p, d.Pos)
		}
	}
	return b
}

func entryKey(stage string, index int) string { return stage + "." + strconv.Itoa(index) }

// place marks the part of p that holds an error at pos as broken.
func (b *broken) place(p *dsl.Policy, pos dsl.Pos) {
	for _, stage := range dsl.Stages {
		for i := 0; p.Writes("chains", stage, strconv.Itoa(i)); i++ {
			if p.Holds(pos, "chains", stage, strconv.Itoa(i)) {
				// An entry whose use names no kind is not decoded, and
				// no predicate is checked in it.
				b.entries[entryKey(stage, i)] = true
				return
			}
		}
	}
	for name := range p.Tools {
		if p.Holds(pos, "tools", name) {
			b.tools[name] = true
			return
		}
	}
	for name := range p.Models {
		if p.Holds(pos, "models", name) {
			b.models = true
			return
		}
	}
	switch {
	case p.Holds(pos, "chains"):
		b.chains = true
	case p.Holds(pos, "tools"), p.Holds(pos, "mcp"):
		b.toolList = true
	case p.Holds(pos, "models"):
		b.modelList = true
	case p.Holds(pos, "state"):
		b.state = true
	case p.Holds(pos, "admit"):
		b.admit = true
	case p.Holds(pos, "invariants"):
		b.invariants = true
	case p.Holds(pos, "stores"), p.Holds(pos, "keys"), p.Holds(pos, "grounding"), p.Holds(pos, "constraints"):
		// No predicate's typing reads them (a constraint's when is
		// checked with the ordering, once the policy loads clean).
	default:
		b.all = true
	}
}

// entry reports whether the predicates of e may be checked: e has no
// error, and neither has what their typing reads (the tools of a
// tool-stage entry, every declared tool when it is not scoped; the
// models and the tools' names in the chat stage).
func (b *broken) entry(e *dsl.Entry) bool {
	if b.all || b.chains || b.entries[entryKey(e.Stage, e.Index)] {
		return false
	}
	switch predicate.Stage(e.Stage) {
	case predicate.Chat:
		return !b.models && !b.modelList && !b.toolList
	case predicate.Tool:
		if b.toolList {
			return false
		}
		if len(e.Tools) == 0 {
			return len(b.tools) == 0
		}
		for _, t := range e.Tools {
			if b.tools[t] {
				return false
			}
		}
	}
	return true
}

// checkCELPartly type-checks the predicates of p, a policy that loaded
// with errors, that neither are in a broken part nor read one, in the
// round that reports the errors. The checked forms are not kept: the
// policy is not lowered.
func checkCELPartly(c *Compilation, p *dsl.Policy) {
	c.Policy = p
	c.checkCEL(brokenParts(c, p))
	c.Policy = nil
	c.Predicates = map[*dsl.Expr]*plan.Predicate{}
	c.byPlace, c.indexed = nil, 0
}
