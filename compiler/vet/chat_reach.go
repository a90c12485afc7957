package vet

import (
	"sort"

	"github.com/google/cel-go/cel"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// Chat reach: which calls two chat-chain entries can both see.
//
// An entry applies to a call unless its `when` is false for it. In the chat
// chain the one fact known statically about a call is its model, one of the
// models the policy declares (agentc serve refuses the others; a fallback
// or hedge replaces it with one of its own, declared too). An entry's
// `when` is therefore evaluated once per declared model, with
// request.model bound to it and everything else (the messages, the run)
// unknown: it always applies to calls of that model, never does, or
// depends on the call.

// Meet says whether two layers can see one call: Never, Depends (their
// `when`s decide, from what a call carries beyond its model) or Always
// (some model's calls reach both, and at most one `when` depends on more
// than the model: a layer's `when` is taken to hold for some calls).
type Meet int8

const (
	Never Meet = iota
	Depends
	Always
)

// chatEnvironment is the chat stage's CEL variables, all dyn, in which
// a when is evaluated for the calls of one model (predicate.ModelWhen).
func chatEnvironment() (*cel.Env, error) { return predicate.ModelEnv() }

// chatWhenKey is one chat `when` for calls of one model.
type chatWhenKey struct {
	src, model string
}

// ChatWhen says whether the chat entry e applies to calls of the named
// model ("" when the policy declares none, and the model is unknown too).
func (a *Analysis) ChatWhen(e *dsl.Entry, model string) Meet {
	if e.When == nil {
		return Always
	}
	k := chatWhenKey{e.When.Source, model}
	if m, ok := a.chatWhens[k]; ok {
		return m
	}
	m := evalChatWhen(e.When.Source, model)
	a.chatWhens[k] = m
	return m
}

func evalChatWhen(src, model string) Meet {
	env, err := chatEnvironment()
	if err != nil {
		return Depends
	}
	ast, issue := checkPredicate(env, src)
	if issue != nil { // compile-cel reports it
		return Depends
	}
	switch v, known := predicate.ModelWhenChecked(env, ast, model); {
	case !known:
		return Depends
	case v:
		return Always
	}
	return Never
}

// evalPartialBool evaluates prg, a program of partial evaluation, with
// vars bound and the attributes of unknowns unknown; known is false when
// the result is not a bool (it depends on an unknown) or the evaluation
// fails.
func evalPartialBool(prg cel.Program, vars map[string]any, unknowns []*cel.AttributePatternType) (value, known bool) {
	act, err := cel.PartialVars(vars, unknowns...)
	if err != nil {
		return false, false
	}
	out, err := evalBounded(prg, act)
	if err != nil {
		return false, false
	}
	return boolValue(out)
}

// chatModels are the models a chat call can name: the declared ones,
// sorted, or "" (unknown) when the policy declares none.
func (a *Analysis) chatModels() []string {
	if len(a.Policy.Models) == 0 {
		return []string{""}
	}
	names := make([]string, 0, len(a.Policy.Models))
	for n := range a.Policy.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// both combines what two `when`s say of calls that reach both layers.
func both(x, y Meet) Meet {
	switch {
	case x == Never || y == Never:
		return Never
	case x == Always || y == Always:
		return Always
	}
	return Depends
}

// ChatMeet says whether the chat entries x and y can see one call. A
// call's model is the one it names, or, below a fallback or hedge, one of
// that layer's models.
func (a *Analysis) ChatMeet(x, y *dsl.Entry) Meet {
	if x.When == nil && y.When == nil {
		return Always
	}
	if y.Index < x.Index {
		x, y = y, x
	}
	var reroute []string
	for _, e := range a.Policy.Chains["chat"] {
		if e.Index > x.Index && e.Index < y.Index && (e.Use == "fallback" || e.Use == "hedge") {
			reroute = append(reroute, stringList(e.Fields["models"])...)
		}
	}
	out := Never
	for _, m := range a.chatModels() {
		outer := a.ChatWhen(x, m)
		if outer == Never {
			continue
		}
		for _, n := range append([]string{m}, reroute...) {
			out = max(out, both(outer, a.ChatWhen(y, n)))
			if out == Always {
				return out
			}
		}
	}
	return out
}

// OwnCallMeet says whether e, a chat entry, applies to the model calls
// own makes of its own (a judge's verdict, a summary): whether own acts at
// all, and e's `when` for the models those calls can name when they reach
// e (ownCallModels). A layer that lets own calls through (PassesOwnCalls)
// never applies to them.
func (a *Analysis) OwnCallMeet(own, e *dsl.Entry) Meet {
	if PassesOwnCalls(e) {
		return Never
	}
	acts := Never
	for _, m := range a.chatModels() {
		acts = max(acts, a.ChatWhen(own, m))
	}
	if acts == Never {
		return Never
	}
	out := Never
	for _, m := range a.ownCallModels(own, e) {
		if out = max(out, a.ChatWhen(e, m)); out == Always {
			break
		}
	}
	return out
}

// ownCallModels returns the models the own calls of own can name when
// they reach e, below it: own's model ("" when the policy does not declare
// it), which each fallback or hedge between them replaces with its own
// models for the calls its `when` takes, as the runtime sends them: all of
// them when it is true for the model, none when false, either when the
// call decides.
func (a *Analysis) ownCallModels(own, e *dsl.Entry) []string {
	model, _ := own.Fields["model"].(string)
	if _, ok := a.Policy.Models[model]; !ok {
		model = ""
	}
	models := []string{model}
	for _, r := range a.Policy.Chains["chat"] {
		if r.Index <= own.Index || r.Index >= e.Index || (r.Use != "fallback" && r.Use != "hedge") {
			continue
		}
		var next []string
		add := func(ms ...string) {
			for _, m := range ms {
				if !contains(next, m) {
					next = append(next, m)
				}
			}
		}
		for _, m := range models {
			switch a.ChatWhen(r, m) {
			case Never:
				add(m)
			case Depends:
				add(m)
				add(stringList(r.Fields["models"])...)
			case Always:
				add(stringList(r.Fields["models"])...)
			}
		}
		models = next
	}
	return models
}

// ownCallConstraints are the builtin constraints about the model calls
// their outer layer makes of its own: their inner layer, placed outside,
// never sees those calls, so they apply where its `when` would take them.
var ownCallConstraints = map[string]bool{
	"judge-before-meter":           true,
	"ratelimit-outside-judge":      true,
	"ratelimit-outside-compaction": true,
}

// pairMeet says whether constraint c's outer and inner entries o and i
// meet: in the tool chain when some tool reaches both, in the chat chain as
// ChatMeet or, for a constraint about own calls, OwnCallMeet.
func (a *Analysis) pairMeet(c *dsl.Constraint, o, i *dsl.Entry) Meet {
	if o.Stage == "chat" && i.Stage == "chat" {
		if c.Builtin && ownCallConstraints[c.ID] {
			return a.OwnCallMeet(o, i)
		}
		return a.ChatMeet(o, i)
	}
	if a.Overlap(o, i) {
		return Always
	}
	return Never
}
