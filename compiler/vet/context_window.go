package vet

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentc-dev/agentc/dsl"
)

// ContextWindow reports a transcript budget above the context window of a
// model the chat chain can call.
var ContextWindow = &Rule{
	Name:     "guard/context-window",
	Severity: dsl.Warning,
	Doc: `a transcript budget above a model's context window.

A model's context_tokens declares its context window. compaction bounds
the transcript to its max_tokens (12,000 by default) and max_tokens refuses
a call whose input is over its limit; a budget above the window of a model
the chat chain can call lets through a transcript that model cannot read,
and the provider refuses the call (a 400) instead of the layer compacting or
refusing it first. Lower the budget to the smallest window, or scope the
layer with when: to the models it fits.`,
	Run: func(p *Pass) {
		var models []*dsl.Model
		smallest := 0
		for _, name := range slices.Sorted(maps.Keys(p.Policy.Models)) {
			if m := p.Policy.Models[name]; m.ContextTokens > 0 {
				models = append(models, m)
				if smallest == 0 || m.ContextTokens < smallest {
					smallest = m.ContextTokens
				}
			}
		}
		if len(models) == 0 {
			return
		}
		for _, e := range p.Policy.Chains["chat"] {
			if e.When != nil {
				continue // it may apply to some models only
			}
			var field string
			var budget int
			switch e.Use {
			case "compaction":
				field, budget = "max_tokens", intField(e, "max_tokens", 12000)
			case "max_tokens":
				field, budget = "limit", intField(e, "limit", 0)
			default:
				continue
			}
			var over []dsl.Related
			var names []string
			for _, m := range models {
				if budget > m.ContextTokens {
					names = append(names, m.Name)
					over = append(over, dsl.Related{Pos: m.Pos, Message: fmt.Sprintf("model %s has context_tokens %d", m.Name, m.ContextTokens)})
				}
			}
			if len(over) == 0 {
				continue
			}
			pos := e.FieldPos(field)
			if pos == e.Pos {
				pos = e.UsePos
			}
			p.Report(dsl.Diagnostic{Pos: pos, Severity: dsl.Warning, Related: over,
				Message: fmt.Sprintf("%s %s %d is above the context window of %s: a transcript that model cannot read gets through, and the provider refuses the call; lower %s to at most %d",
					e.Ref(), field, budget, andList(names), field, smallest)})
		}
	},
}
