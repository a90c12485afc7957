package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// anthropicMaxTokens is the max_tokens the anthropic provider's client
// sends with a request that sets none when its model declares no
// max_tokens (anthropic.DefaultMaxTokens; the compiler does not link the
// providers).
const anthropicMaxTokens = 4096

// BudgetBelowEstimate reports a chat meter that refuses a crossing call
// (on_cross "refuse") whose tokens or usd ceiling is below what it
// estimates for one call of a model before any input is counted.
var BudgetBelowEstimate = &Rule{
	Name:     "guard/budget-below-estimate",
	Severity: dsl.Warning,
	Doc: `a meter with on_cross "refuse" whose ceiling is below the estimate of one call, so it refuses every call of a model that sets no max_tokens.

With on_cross "refuse" a meter refuses, before it runs, a model call whose
estimate added to the ledger exceeds a tokens or usd ceiling, even on an
empty ledger. The estimate counts, as output, the request's max_tokens or,
when the request sets none, the bound the model's client sends: the
model's max_tokens, or 4096 for an anthropic model that declares none
(an openai model without one has none, and its output is not estimated);
it takes the largest among the requested model and the models of a
fallback or hedge inside the meter; and it counts once for each model call
the layers inside the meter can make for one call (a retry's max_attempts
times the models of a fallback or hedge). Where that output alone, with
no input counted, is above budget.tokens, or costs more than budget.usd at
the model's usd_per_mtok_out, every call of the model that does not set a
lower max_tokens is refused with a budget error, on the first call of the
run as on any other. Raise the ceiling, lower the model's max_tokens, or
make fewer model calls inside the meter.

The models held to it are those whose calls reach the meter: the declared
ones as rerouted by the fallback and hedge layers outside it, and the
models of a judge's or a summarizing compaction's own calls, where the
meter's when applies to them.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["chat"] {
			p.budgetBelowEstimate(e)
		}
	},
}

// outputBound returns the output tokens the meter estimates for a call of
// the named model that sets no max_tokens (0: none).
func (p *Pass) outputBound(name string) int {
	m := p.Policy.Models[name]
	switch {
	case m == nil:
		return 0
	case m.MaxTokens > 0:
		return m.MaxTokens
	case m.Provider == "anthropic":
		return anthropicMaxTokens
	}
	return 0
}

// meterCeilings returns a meter entry's budget ceilings in tokens and in
// dollars, each with whether it is set.
func meterCeilings(e *dsl.Entry) (tokens float64, hasTokens bool, usd float64, hasUSD bool) {
	budget, _ := e.Fields["budget"].(map[string]any)
	tokens, hasTokens = number(budget["tokens"])
	usd, hasUSD = number(budget["usd"])
	return tokens, hasTokens, usd, hasUSD
}

func (p *Pass) budgetBelowEstimate(e *dsl.Entry) {
	if e.Use != "meter" || stringField(e, "on_cross") != "refuse" {
		return
	}
	tokens, hasTokens, usd, hasUSD := meterCeilings(e)
	if !hasTokens && !hasUSD {
		return
	}
	chain := p.Policy.Chains["chat"]
	inside := chain[e.Index+1:]
	calls := 1
	var below []string
	for _, in := range inside {
		calls = CallProduct(calls, Attempts(in))
		if in.Use == "fallback" || in.Use == "hedge" {
			below = append(below, stringList(in.Fields["models"])...)
		}
	}
	var names []string
	var rel []dsl.Related
	field := ""
	for _, name := range p.modelsAt(e) {
		if name == "" || p.ChatWhen(e, name) == Never {
			continue
		}
		out, cost := 0, 0.0
		for _, x := range append([]string{name}, below...) {
			n := p.outputBound(x)
			out = max(out, n)
			if m := p.Policy.Models[x]; m != nil {
				cost = max(cost, float64(n)*m.USDPerMTokOut/1e6)
			}
		}
		estTokens := float64(out) * float64(calls)
		estUSD := cost * float64(calls)
		var what string
		switch {
		case out == 0:
			continue
		case hasTokens && estTokens > tokens:
			what = fmt.Sprintf("%.0f output tokens for `%s` (over budget.tokens %.0f)", estTokens, name, tokens)
			field = "budget.tokens"
		case hasUSD && estUSD > usd:
			what = fmt.Sprintf("$%.4g of output for `%s` (over budget.usd %g)", estUSD, name, usd)
			if field == "" {
				field = "budget.usd"
			}
		default:
			continue
		}
		names = append(names, what)
		if m := p.Policy.Models[name]; m != nil {
			rel = append(rel, dsl.Related{Pos: m.Pos, Message: fmt.Sprintf("model %s is declared here", name)})
		}
	}
	if len(names) == 0 {
		return
	}
	pos := e.FieldPos(field)
	if pos == e.Pos {
		pos = e.UsePos
	}
	per := ""
	if calls > 1 {
		per = fmt.Sprintf(", once for each of the %s model calls the layers inside it can make for one call", Calls(calls))
	}
	p.Report(dsl.Diagnostic{Pos: pos, Related: rel,
		Message: fmt.Sprintf("%s refuses a call that would cross its ceiling (on_cross \"refuse\"), and estimates the output of a call that sets no max_tokens at its model's bound%s: before any input is counted, that is %s, so every call of them that sets no lower max_tokens is refused before it runs; raise the ceiling, lower the models' max_tokens, or make fewer model calls inside the meter",
			e.Ref(), per, andList(names))})
}

// number returns a numeric config value as a float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
