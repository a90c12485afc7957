package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// OwnCaller reports whether e makes model calls of its own: a judge (its
// verdict) or a compaction with strategy "summarize" (its summary). Such a
// call runs through the chat chain below e.
func OwnCaller(e *dsl.Entry) bool {
	switch e.Use {
	case "judge":
		return true
	case "compaction":
		s, _ := e.Fields["strategy"].(string)
		return s == "summarize"
	}
	return false
}

// PassesOwnCalls reports whether e, a chat entry, lets the own calls of a
// judge or a summarizing compaction above it through without acting on
// them, whatever its when: an output_coerce, whose schema describes the
// answer, not a verdict or a summary (the runtime tells an own call by
// runtime.ChatCall.Own).
func PassesOwnCalls(e *dsl.Entry) bool { return e.Use == "output_coerce" }

// OwnCallRecursion reports a layer that makes its own model calls inside
// another one, unscoped.
var OwnCallRecursion = &Rule{
	Name:     "order/own-call-recursion",
	Severity: dsl.Error,
	Warns:    true,
	Doc: `a judge sits inside another judge or a summarizing compaction whose calls its when lets through.

A judge's verdict call and a summarizing compaction's summary call run
through the chat chain below their own layer, so that the meter, retry,
fallback and tracing inside it apply to them. A second such layer below
would run on those calls too and make a model call of its own about each:
a judge judging the other judge's verdicts, or a judge judging each
summary, calls made about calls. Scope the inner layer with a when on
request.model (when: "request.model == 'primary'") to keep it off the
outer layer's calls, or keep one of the two. A when that is false for
calls of the outer layer's model keeps it off; one that is true for them
does not; one that depends on more than the model (the messages, the run)
makes the finding a warning. A fallback or hedge between the two sends the
outer layer's calls to its models, and the when is read for those.

A summarizing compaction inside a judge or another summarizing compaction
is not reported: a verdict or summary call is one system message and one
user message, which compaction keeps whole (keep_recent is at least 1), so
it never summarizes one.`,
	Run: func(p *Pass) {
		chain := p.Policy.Chains["chat"]
		for _, outer := range chain {
			if !OwnCaller(outer) {
				continue
			}
			for _, inner := range chain[outer.Index+1:] {
				if !OwnCaller(inner) || inner.Use == "compaction" {
					// A summarizing compaction never summarizes a verdict
					// or summary call: one system message and one user
					// message, which keep_recent (at least 1) keeps whole.
					continue
				}
				meet := p.OwnCallMeet(outer, inner)
				if meet == Never {
					continue
				}
				d := dsl.Diagnostic{Pos: inner.Pos, Related: []dsl.Related{at(outer, "%s is here, outside %s", outer.Ref(), inner.Ref())},
					Message: fmt.Sprintf("%s sits inside %s, whose own model calls run through the chain below it%s: %s would make a model call of its own about each of them; %s, or remove one",
						inner.Ref(), outer.Ref(), letThrough(inner), inner.Ref(), p.scopeAdvice(inner, outer))}
				if meet == Depends {
					d.Severity = dsl.Warning
					d.Message += dependsNote(true, inner)
				}
				p.Report(d)
			}
		}
	},
}

// letThrough says that e's when lets an own caller's calls through, for
// messages ("" for an entry without one).
func letThrough(e *dsl.Entry) string {
	if e.When == nil {
		return ""
	}
	return fmt.Sprintf(", and the when of %s (%q) lets them through", e.Ref(), e.When.Source)
}

// scopeAdvice tells how to keep e off own's calls: give it a when on
// request.model, or make the one it has false for the models they name
// there (own's, or those of a fallback or hedge between the two).
func (a *Analysis) scopeAdvice(e, own *dsl.Entry) string {
	if e.When == nil {
		return fmt.Sprintf("scope %s with a when on request.model", e.Ref())
	}
	model, _ := own.Fields["model"].(string)
	var names []string
	for _, m := range a.ownCallModels(own, e) {
		if m == "" {
			m = model
		}
		names = append(names, fmt.Sprintf("%q", m))
	}
	return "make its when false for calls of " + andList(names)
}

// OwnCallRerouter returns the fallback or hedge below own, an own caller,
// whose models do not include own's model and whose when does not keep it
// off own's calls: it sends them to other models (nil: none does).
func (a *Analysis) OwnCallRerouter(chain []*dsl.Entry, own *dsl.Entry) *dsl.Entry {
	model, _ := own.Fields["model"].(string)
	for _, e := range chain[own.Index+1:] {
		if (e.Use != "fallback" && e.Use != "hedge") || a.OwnCallMeet(own, e) == Never {
			continue
		}
		models, _ := e.Fields["models"].([]any)
		found := false
		for _, m := range models {
			if s, _ := m.(string); s == model {
				found = true
			}
		}
		if !found {
			return e
		}
	}
	return nil
}

// OwnCallRerouted reports a fallback or hedge that sends a judge's or a
// summary's own calls to models other than the layer's.
var OwnCallRerouted = &Rule{
	Name:     "order/own-call-rerouted",
	Severity: dsl.Warning,
	Doc: `a fallback or hedge inside a judge or summarizing compaction sends its calls to other models.

A judge's verdict call and a summarizing compaction's summary call run
through the chat chain below their own layer. A fallback or hedge there
replaces the request's model with each of its own models in turn, so when
its models do not include the layer's model, the verdict or summary is
asked of those models and the layer's model is never called: the reply
model judges its own replies. List the layer's model in the fallback's
models, scope the fallback with a when on request.model that is false
for the layer's model, or move it outside the layer.`,
	Run: func(p *Pass) {
		chain := p.Policy.Chains["chat"]
		for _, own := range chain {
			if !OwnCaller(own) {
				continue
			}
			if r := p.OwnCallRerouter(chain, own); r != nil {
				model, _ := own.Fields["model"].(string)
				scope := "without a when"
				if r.When != nil {
					scope = fmt.Sprintf("with a when (%q) that lets them through", r.When.Source)
				}
				msg := fmt.Sprintf("%s sits inside %s %s: it sends %s's own model calls to its models instead of %q; list %q in its models, %s, or move it outside %s",
					r.Ref(), own.Ref(), scope, own.Ref(), model, model, p.scopeAdvice(r, own), own.Ref())
				if p.OwnCallMeet(own, r) == Depends {
					msg += dependsNote(false, r)
				}
				p.Reportf(r.Pos, []dsl.Related{at(own, "%s is here, outside %s", own.Ref(), r.Ref())}, "%s", msg)
			}
		}
	},
}
