package vet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
)

// NestedRetry reports retries that wrap each other.
var NestedRetry = &Rule{
	Name:     "order/nested-retry",
	Severity: dsl.Warning,
	Doc: `two retries in one chain multiply attempts.

Each attempt of the outer retry runs the inner retry in full, so a failing
call runs the product of their max_attempts: 3 and 3 make 9 calls to a model
or tool that is already struggling, with backoffs that add up. The message
gives the product over every layer that re-invokes the call (retries, and
the models of a fallback or hedge), the same count agentc explain gives and
a run makes (beyond a million, "more than 1,000,000"), and its first
factors. Retries scoped with tools: to different tools do not wrap each
other and are not reported, nor is a retry with max_attempts: 1, which
never runs a call again.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			chain := p.Policy.Chains[stage]
			var retries []*dsl.Entry
			for _, e := range chain {
				if e.Use != "retry" || Attempts(e) <= 1 {
					// A retry of one attempt multiplies nothing.
					continue
				}
				// The nearest retry outside e that wraps the same calls.
				var near *dsl.Entry
				for i := len(retries) - 1; i >= 0 && near == nil; i-- {
					if p.Overlap(retries[i], e) {
						near = retries[i]
					}
				}
				retries = append(retries, e)
				if near == nil {
					continue
				}
				n, factors := p.Reinvocations(chain, e)
				p.Reportf(e.Pos, []dsl.Related{at(near, "%s (max_attempts %d) is here, outside %s", near.Ref(), Attempts(near), e.Ref())},
					"%s (max_attempts %d) sits inside %s (max_attempts %d): a failing call reaches %s up to %s times (%s); keep one retry, or %s",
					e.Ref(), Attempts(e), near.Ref(), Attempts(near), callee(stage), Calls(n), factors, scopeApart(stage))
			}
		}
	},
}

// Reinvocations returns how many times a failing call that goes through e
// reaches the model or tool: the product of the attempts of every layer of
// chain that re-invokes what it wraps (retry, fallback, hedge) and can
// wrap the same calls as e, with e's own; and the product's factors
// ("4 × 2 × 3"), as explain spells them.
//
// Entries of one stage with the same scope (tools: and when) overlap the
// same layers, so the result is computed once per scope: a chain of n
// retries costs O(n), not O(n²).
func (a *Analysis) Reinvocations(chain []*dsl.Entry, e *dsl.Entry) (int, string) {
	key := scopeKey(e)
	if r, ok := a.reinvoke[key]; ok {
		return r.n, r.factors
	}
	var attempts []int
	var factors []string
	for _, o := range chain {
		if o != e && (o.Kind == nil || !o.Kind.Has("reinvokes") || !a.Overlap(o, e)) {
			continue
		}
		if k := Attempts(o); k > 1 {
			attempts = append(attempts, k)
			factors = append(factors, fmt.Sprint(k))
		}
	}
	r := reinvocations{CallProduct(attempts...), Factors(factors, "layers")}
	if a.Overlap(e, e) { // else e's own attempts are not those of its scope
		a.reinvoke[key] = r
	}
	return r.n, r.factors
}

// scopeKey identifies the calls an entry can wrap: its stage, its tools:
// list and its when.
func scopeKey(e *dsl.Entry) string {
	tools := slices.Clone(e.Tools)
	slices.Sort(tools)
	when := ""
	if e.When != nil {
		when = e.When.Source
	}
	return string(e.Stage) + "\x00" + strings.Join(tools, "\x00") + "\x00\x01" + when
}
