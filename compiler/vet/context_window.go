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
layer with when: to the models it fits.

The models held to the budget are those the layer's calls can reach: the
model a call names, unless a fallback or hedge (outside the layer or
inside it) replaces it with its own models, and only the models the
layer's when lets through: a model that an unconditional fallback or hedge
replaces never reads the transcript, and is not held to it.`,
	Run: func(p *Pass) {
		windowed := false
		for _, m := range p.Policy.Models {
			windowed = windowed || m.ContextTokens > 0
		}
		if !windowed {
			return
		}
		for _, e := range p.Policy.Chains["chat"] {
			reached, known := p.modelsReadingTranscript(e)
			if !known {
				continue // its when decides, from more than the model
			}
			var models []*dsl.Model
			smallest := 0
			for _, name := range reached {
				if m := p.Policy.Models[name]; m != nil && m.ContextTokens > 0 {
					models = append(models, m)
					if smallest == 0 || m.ContextTokens < smallest {
						smallest = m.ContextTokens
					}
				}
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

// modelsReadingTranscript lists the declared models that can read a
// transcript the chat entry e passes on: the models a call can name where
// e sits (every declared one, as rerouted by the fallback and hedge layers
// outside e), those e's when applies to, then as rerouted by the fallback
// and hedge layers inside e. known is false when e's when depends on more
// than the model.
func (a *Analysis) modelsReadingTranscript(e *dsl.Entry) (models []string, known bool) {
	chain := a.Policy.Chains["chat"]
	set := a.reroute(chain[:e.Index], a.chatModels())
	var kept []string
	for _, m := range set {
		switch a.ChatWhen(e, m) {
		case Depends:
			return nil, false
		case Always:
			kept = append(kept, m)
		}
	}
	return a.reroute(chain[e.Index+1:], kept), true
}

// modelsAt lists the models whose calls reach the chat entry e: the
// declared ones as rerouted by the fallback and hedge layers outside e,
// and the own calls' models of a judge or summarizing compaction outside
// e, as rerouted by those between it and e.
func (a *Analysis) modelsAt(e *dsl.Entry) []string {
	chain := a.Policy.Chains["chat"]
	set := a.reroute(chain[:e.Index], a.chatModels())
	for _, o := range chain[:e.Index] {
		if m, _ := o.Fields["model"].(string); OwnCaller(o) && m != "" {
			set = append(set, a.reroute(chain[o.Index+1:e.Index], []string{m})...)
		}
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// reroute maps the models calls can name through the fallback and hedge
// entries of layers, outermost first: a layer that applies to a model's
// calls replaces it with its own models, one whose when depends on the
// call may leave it or replace it.
func (a *Analysis) reroute(layers []*dsl.Entry, models []string) []string {
	set := map[string]bool{}
	for _, m := range models {
		set[m] = true
	}
	for _, r := range layers {
		if r.Use != "fallback" && r.Use != "hedge" {
			continue
		}
		next := map[string]bool{}
		for m := range set {
			w := a.ChatWhen(r, m)
			if w != Always {
				next[m] = true
			}
			if w != Never {
				for _, n := range stringList(r.Fields["models"]) {
					next[n] = true
				}
			}
		}
		set = next
	}
	return slices.Sorted(maps.Keys(set))
}
