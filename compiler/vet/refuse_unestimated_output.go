package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// RefuseUnestimatedOutput reports a chat meter that refuses a crossing
// call (on_cross "refuse") and reaches a model whose output it cannot
// estimate: one that declares no max_tokens and whose client sends none.
var RefuseUnestimatedOutput = &Rule{
	Name:     "guard/output-unestimated",
	Severity: dsl.Warning,
	Doc: `a meter with on_cross "refuse" reaching a model whose output it cannot estimate, so calls in flight together can cross its ceiling by their output.

With on_cross "refuse" a meter reserves each call's estimate while it runs
and refuses a call whose estimate, added to the ledger and the calls in
flight, would cross a tokens or usd ceiling: the ledger then exceeds the
ceiling only by what calls charged beyond their estimates. The estimate
counts as output the request's max_tokens or, when the request sets none,
the bound the model's client sends: the model's max_tokens, 4096 for an
anthropic model that declares none, nothing for any other. For a model
that declares no max_tokens and is not anthropic, a call that sets none is
estimated by its input alone, so its whole output is beyond the estimate:
the calls in flight at once can each be admitted and together cross the
ceiling by all their output. A warning at on_cross, naming the models:
give them max_tokens.

The models held to it are those whose calls reach the meter, as
guard/budget-below-estimate reads them, and those of a fallback or hedge
inside it.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["chat"] {
			p.refuseUnestimatedOutput(e)
		}
	},
}

func (p *Pass) refuseUnestimatedOutput(e *dsl.Entry) {
	if e.Use != "meter" || stringField(e, "on_cross") != "refuse" {
		return
	}
	if _, hasTokens, _, hasUSD := meterCeilings(e); !hasTokens && !hasUSD {
		return // a calls ceiling counts calls, not their output
	}
	var inside []string
	for _, in := range p.Policy.Chains["chat"][e.Index+1:] {
		if in.Use == "fallback" || in.Use == "hedge" {
			inside = append(inside, stringList(in.Fields["models"])...)
		}
	}
	seen := map[string]bool{}
	var names []string
	var rel []dsl.Related
	for _, name := range p.modelsAt(e) {
		if name == "" || p.ChatWhen(e, name) == Never {
			continue
		}
		for _, x := range append([]string{name}, inside...) {
			m := p.Policy.Models[x]
			if m == nil || seen[x] || p.outputBound(x) > 0 {
				continue
			}
			seen[x] = true
			names = append(names, "`"+x+"`")
			rel = append(rel, dsl.Related{Pos: m.Pos, Message: fmt.Sprintf("model %s is declared here without max_tokens", x)})
		}
	}
	if len(names) == 0 {
		return
	}
	pos := e.FieldPos("on_cross")
	if pos == e.Pos {
		pos = e.UsePos
	}
	p.Report(dsl.Diagnostic{Pos: pos, Related: rel,
		Message: fmt.Sprintf("%s refuses a call that would cross its ceiling (on_cross \"refuse\"), but estimates the output of a call of %s that sets no max_tokens at nothing (the model declares no max_tokens, and its client sends none): each call is admitted on its input alone, so calls in flight together can cross the ceiling by all their output; give the models max_tokens",
			e.Ref(), andList(names))})
}
