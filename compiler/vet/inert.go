package vet

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

	"github.com/agentc-dev/agentc/builtins/security"
	"github.com/agentc-dev/agentc/dsl"
)

// Inert reports layers that can never act on the calls they are given.
var Inert = &Rule{
	Name:     "guard/inert",
	Severity: dsl.Error,
	Warns:    true,
	Doc: `a checking layer that can never act on the calls it is given.

file_check checks the argument a tool names with path_arg, and egress the
one it names with url_arg and, unless its scan_args is false, every URL
written in a call's arguments: a tool without path_arg passes through
file_check unchecked, and one without url_arg through an egress with
scan_args false. Such a file_check or egress scoped with tools: to such a
tool is an error: the layer refuses every call of it, as it cannot tell
which argument holds the path or URL, so the tool cannot be used; and
so is a tool_policy
arg_patterns entry naming an argument that none of the tools it applies to
declares, in any case, in an args schema closed by additionalProperties:
false (the pattern never matches); where a schema is open, a call may
carry the argument and the pattern is tried on it: a warning. Nothing is
said of an unscoped tool_policy where undeclared or MCP tools may be
called, whose arguments the policy does not describe. idempotent
dedupes side-effecting tools only: one scoped to a tool that is not
side_effecting is an error (its calls run again on every delivery). A
key_args entry naming an argument that a side-effecting tool it applies
to does not declare, in an args schema closed by additionalProperties:
false, is a schema/bad-reference error (every call of that tool is
refused); one naming an argument the tool declares but does not require,
or one an open schema does not list (a call may carry it), is a warning
(a call without it is refused). A key_args or arg_patterns name gets the
closest argument the tools declare as its did-you-mean (orderid:
order_id). So is a url_arg or path_arg naming an
argument the tool declares but does not require, for a tool an egress or
file_check checks: the layer refuses a call without the URL or path. An
unscoped file_check or egress (scan_args false) when no declared tool has
the argument, or an
unscoped idempotent when no declared tool is side_effecting (and no MCP
server serves tools, which are side-effecting unless it marks them
read-only), checks nothing: a warning (agentc explain says so; agentc serve refuses
to load such a file_check or egress in front of MCP servers' tools none
of which is declared with the argument). The same holds for a tool-chain output_coerce without
schema, which checks each tool's result against its result_schema: scoped
to a tool without one it is an error, unscoped when no tool has one a
warning. A content_filter with neither keywords nor patterns, and a
security or redact layer with defaults: false and nothing of its own
(patterns, or a security classifier), match nothing: a warning. So do a
tool_policy with no allow, deny nor arg_patterns, and a file_check whose roots hold "/" and that
sets no extensions, max_bytes nor must_exist: every path lies inside "/". A
security threshold above the most the phrase families can sum to (every
family matching at once), or set with defaults: false, which drops the
families, leaves them unable to block: the layer blocks on its signatures,
patterns and classifier only, a warning at the threshold. A pattern of a
tool_policy's arg_patterns, or of a redact, content_filter or security
layer, or of a run-state field's redact handler, that can match no text
never blocks (masks) anything: an error at the pattern (the handler). $
and \z match only at the end of the text and ^ and \A only at its start
(without the m flag), so 'drop$table', where \s+ was meant, requires text
after the end; a character class that holds no character matches nothing
either. A security layer also matches each pattern with its letters
folded as it normalizes the text (full-width forms to ASCII): one is
reported only where the folded copy cannot match either
('secret$｜jailbreak', with a full-width ｜, folds to one that can). A
pattern whose match is only unlikely is not reported.
A tool-chain memoize or semantic_memoize caches the declared tools that are
neither side_effecting (order/memoize-side-effect) nor secret_result: one
scoped to a tool the policy does not declare (an MCP server's tool, or one
settings.allow_undeclared_tools lets run) or to a secret_result tool is an
error, as every call of it runs uncached.

A meter's budget.usd counts dollars at the prices of models: a call to a
model declared without one (neither usd_per_mtok_in nor usd_per_mtok_out
written), or to a model the policy does not declare, costs nothing. When
every declared model's price is 0 or unset, or the policy declares none,
the ceiling is never reached and the meter refuses nothing on its account: an error. When
some models have a price and others not, calls to those others are never
counted: a warning, unless the meter has a when (it may apply to the
priced models only); a model that is free, such as one served locally,
says so with usd_per_mtok_in: 0 and is not counted there.

A hedge starts its next model after delay, the one after that a delay
later, but a retry outside it (without a when) cancels the attempt, and
the race with it, once its attempt_timeout has passed without a delta. A
backup due no sooner than that never races a slow model: the hedge moves
on only when a model fails at once. A warning at the hedge's delay, with
the retry's attempt_timeout as the related position; make delay shorter,
or place the hedge outside the retry.

A fallback or hedge sets the model of each call it makes, and so does one
inside it: a fallback or hedge inside another whose when holds for every
model the outer one names replaces that model with its own, so the outer
layer's models are never called as named. A fallback to primary and
backup over a hedge of primary and third never calls backup (falling
over only runs the hedge again); a hedge of primary and backup over a
fallback to x and y races the fallback against itself, x against x. An
error at the outer layer's models, with the inner layer as the related
position; list the models in one layer, or give the inner one a when
that leaves the outer one's models to it.

A chat-chain layer of any kind whose when holds for the calls of some
declared model but of none that reaches it never acts: a fallback or hedge
outside it replaces the model a call names with its own models
(request.model == 'local' inside a fallback to primary and backup), and
only the own calls of a judge or summarizing compaction outside it keep
theirs. An error at the when; make it hold for the models the layer is
meant for, or move the layer outside the fallback or hedge. A chat layer
whose when is false for the calls of every declared model, wherever it
sits, never acts either: request.model holds the name the policy gives a
model, so request.model.startsWith('gpt') never holds where the models
are named primary and backup. A warning at the when, as a host may
register a model client the policy does not declare, naming the declared
model whose provider id the when holds for; a when comparing
request.model with a constant is left to cel/unknown-value. A tool-chain
layer whose when is false for every declared tool it could apply to
(tool.name.startsWith('refnd') where the tool is refund, tool.url_arg !=
'' where no tool declares url_arg, !tool.side_effecting scoped to a
side-effecting tool) never acts either, where only declared tools run:
an error at the when.

A tool-chain layer scoped with tools: to a tool that a tool_policy outside
it refuses (without a when, or with one that holds for every call of the
tool), by its deny list or by leaving the tool out of its allow list,
never sees that tool's calls: they are blocked before they reach it. An
error at the name when every tool the layer is scoped to is refused, as
the layer never acts; a warning when only some are. A layer scoped by its
when to tools that are all refused (when: "tool.name == 'wire'") never
acts either: an error at the when. A layer outside the tool_policy sees
every call and is not reported.

A tool_policy with allow: [] refuses every tool call: a warning at its
allow, unless a when or tools: scopes it to some calls, as meant. A
tool-chain layer inside it whose when holds for every declared tool never
acts: an error at the when, as above. A tool_policy whose deny names a
declared tool it never applies to (tools: ["fetch"] with deny: ["wipe"],
or a when false for every call of wipe) never sees that tool's calls,
which run: an error at the name.

A policy with an egress (file_check) layer means to check the URLs
(paths) its tools take: a tool that declares url_arg (path_arg) and that
no such layer applies to, by their tools: or when, has them go
unchecked: a warning at the first layer's tools: (when), naming the
tool.`,
	Run: func(p *Pass) {
		for _, stage := range dsl.Stages {
			for _, e := range p.Policy.Chains[stage] {
				p.inertMatchers(e)
				p.inertPatterns(e)
			}
		}
		p.inertStatePatterns()
		for i, e := range p.Policy.Chains["chat"] {
			p.inertChatWhen(e)
			switch e.Use {
			case "meter":
				p.inertMeterUSD(e)
			case "hedge":
				p.inertHedge(e, p.Policy.Chains["chat"][:i])
			}
			p.inertRerouted(e)
		}
		p.inertUncheckedArgs("egress", "url_arg", "URLs", func(t *dsl.Tool) string { return t.URLArg })
		p.inertUncheckedArgs("file_check", "path_arg", "paths", func(t *dsl.Tool) string { return t.PathArg })
		optional := map[string]bool{}
		for i, e := range p.Policy.Chains["tool"] {
			p.inertToolWhen(e)
			p.inertRefusedTools(e, p.Policy.Chains["tool"][:i])
			switch e.Use {
			case "egress", "file_check":
				p.inertOptionalArg(e, optional)
			}
			switch e.Use {
			case "output_coerce":
				if _, ok := e.Fields["schema"]; !ok {
					p.inertArgCheck(e, "result_schema", func(t *dsl.Tool) string { return string(t.ResultSchema) })
				}
			case "egress":
				if scan, ok := e.Fields["scan_args"].(bool); !ok || scan {
					continue
				}
				p.inertArgCheck(e, "url_arg", func(t *dsl.Tool) string { return t.URLArg })
			case "file_check":
				p.inertArgCheck(e, "path_arg", func(t *dsl.Tool) string { return t.PathArg })
			case "tool_policy":
				p.inertArgPatterns(e)
				p.inertPolicyDeny(e)
			case "idempotent":
				p.inertIdempotent(e)
			case "memoize", "semantic_memoize":
				p.inertCache(e)
			}
		}
	},
}

// inertRefusedTools reports a tool-chain entry scoped with tools: to tools
// that a tool_policy outside it (without a when) refuses, by its deny list
// or by leaving them out of its allow list: their calls are blocked before
// they reach the entry. All of them refused is an error, as the entry never
// acts; some of them a warning at each refused name.
func (p *Pass) inertRefusedTools(e *dsl.Entry, outside []*dsl.Entry) {
	if len(e.Tools) == 0 {
		p.inertRefusedWhen(e, outside)
		return
	}
	refusedBy := make([]*dsl.Entry, len(e.Tools))
	why := make([]string, len(e.Tools))
	n := 0
	for i, name := range e.Tools {
		if refusedBy[i], why[i] = p.refusingPolicy(name, outside); refusedBy[i] != nil {
			n++
		}
	}
	if n == 0 {
		return
	}
	sev, verdict := dsl.Warning, "those calls never reach it"
	if n == len(e.Tools) {
		sev, verdict = dsl.Error, "no call it is scoped to reaches it, so it never acts"
	}
	for i, name := range e.Tools {
		o := refusedBy[i]
		if o == nil {
			continue
		}
		p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: sev,
			Related: []dsl.Related{{Pos: o.UsePos, Message: fmt.Sprintf("%s refuses `%s`: %s", o.Ref(), name, why[i])}},
			Message: fmt.Sprintf("%s is scoped to `%s`, which %s outside it refuses before the call gets here (%s): %s; remove it from tools:, or let %s allow it",
				e.Ref(), name, o.Ref(), why[i], verdict, o.Ref())})
	}
}

// refusingPolicy returns the tool_policy among outside that refuses the
// named tool, and why, or nil. One with a when refuses it only where its
// when holds for every call of the tool (tool.side_effecting).
func (p *Pass) refusingPolicy(name string, outside []*dsl.Entry) (*dsl.Entry, string) {
	for _, o := range outside {
		if o.Use != "tool_policy" || len(o.Tools) > 0 && !slices.Contains(o.Tools, name) {
			continue
		}
		if o.When != nil {
			if v, known := p.predicate(o.When.Source).eval(p.Policy.Tools[name]); !known || !v {
				continue
			}
		}
		allow, hasAllow := o.Fields["allow"]
		switch {
		case slices.Contains(stringList(o.Fields["deny"]), name):
			return o, "its deny lists it"
		case hasAllow && !slices.Contains(stringList(allow), name):
			return o, "its allow leaves it out"
		}
	}
	return nil, ""
}

// inertRefusedWhen reports a tool-chain entry scoped by its when to
// declared tools (when: "tool.name == 'wire'") that a tool_policy outside
// it refuses, every one of them: it never acts, an error at the when. An
// entry whose when may hold for an undeclared tool that can run, or for a
// tool no tool_policy refuses, is not reported.
func (p *Pass) inertRefusedWhen(e *dsl.Entry, outside []*dsl.Entry) {
	if e.When == nil || e.Stage != "tool" || p.UndeclaredToolsRun() {
		return
	}
	var names []string
	var rel []dsl.Related
	for _, name := range p.toolNames() {
		if !p.Applies(e, name) {
			continue
		}
		o, why := p.refusingPolicy(name, outside)
		if o == nil {
			return
		}
		names = append(names, "`"+name+"`")
		rel = append(rel, dsl.Related{Pos: o.UsePos, Message: fmt.Sprintf("%s refuses `%s`: %s", o.Ref(), name, why)})
	}
	if len(names) == 0 {
		return // never applies: cel/constant's
	}
	holds := "holds only for " + andList(names) + ", which"
	if len(names) == len(p.toolNames()) {
		holds = "holds for every tool the policy declares, all of which"
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("when"), Severity: dsl.Error, Related: rel,
		Message: fmt.Sprintf("the when of %s %s the tool_policy outside it refuses before the call gets here: no call it applies to reaches it, so it never acts; make its when hold for tools the policy allows, or let the tool_policy allow them",
			e.Ref(), holds)})
}

// inertChatWhen reports a chat entry whose when holds for calls of some
// declared model, but of none that reaches it: the fallback and hedge
// layers outside it replace the model a call names with their own (a
// judge's or a summarizing compaction's own calls outside it keep theirs),
// so the layer never acts.
func (p *Pass) inertChatWhen(e *dsl.Entry) {
	if e.When == nil {
		return
	}
	live := false
	for _, m := range p.chatModels() {
		live = live || p.ChatWhen(e, m) != Never
	}
	if !live {
		p.inertChatWhenNoModel(e)
		return
	}
	models := p.modelsAt(e)
	var rel []dsl.Related
	for _, m := range models {
		if p.ChatWhen(e, m) != Never {
			return
		}
	}
	for _, o := range p.Policy.Chains["chat"][:e.Index] {
		if o.Use == "fallback" || o.Use == "hedge" {
			rel = append(rel, at(o, "%s is here, outside %s: it calls %s", o.Ref(), e.Ref(), andList(stringList(o.Fields["models"]))))
		}
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("when"), Severity: dsl.Error, Related: rel,
		Message: fmt.Sprintf("the when of %s is false for the calls of every model that reaches it (%s): the layers outside it replace the model a call names, so %s never acts; make its when hold for the models it is meant for, or move it outside the fallback or hedge",
			e.Ref(), andList(models), e.Ref())})
}

// inertRerouted reports a fallback or hedge whose models are replaced by
// those of a fallback or hedge inside it that applies to every call it
// makes (Analysis.ReroutedInside): the models it names are never called
// as named, and it only runs the inner layer again (a fallback) or races
// it against itself (a hedge).
func (p *Pass) inertRerouted(e *dsl.Entry) {
	in := p.ReroutedInside(e)
	if in == nil {
		return
	}
	named, own := stringList(e.Fields["models"]), slices.Compact(slices.Clone(stringList(in.Fields["models"])))
	var lost []string
	for _, m := range named {
		if !slices.Contains(own, m) && !slices.Contains(lost, m) {
			lost = append(lost, m)
		}
	}
	what := e.Ref() + " only runs " + in.Ref() + " again"
	switch {
	case e.Use == "fallback" && len(named) == 1:
		what = e.Ref() + " only passes its calls on to " + in.Ref()
	case e.Use == "hedge":
		what = e.Ref() + " races " + in.Ref() + " against itself"
	}
	switch len(lost) {
	case 0:
	case 1:
		what = lost[0] + " is never called, and " + what
	default:
		what = andList(lost) + " are never called, and " + what
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("models"), Severity: dsl.Error,
		Related: []dsl.Related{at(in, "%s is here, inside %s: it calls %s", in.Ref(), e.Ref(), andList(own))},
		Message: fmt.Sprintf("%s names %s, but %s inside it sends every call to its own models (%s), whatever model the call names: %s; list the models in one layer, or give %s a when that leaves the models of %s to it",
			e.Ref(), andList(named), in.Ref(), andList(own), what, in.Ref(), e.Ref())})
}

// ReroutedInside returns the first fallback or hedge inside the chat
// entry e, itself a fallback or hedge, whose when holds for every model a
// call e makes can name where it sits: it replaces the model e set with its
// own on each of e's calls, so none of e's models is called as named. Nil
// when there is none, or e is neither a fallback nor a hedge.
func (a *Analysis) ReroutedInside(e *dsl.Entry) *dsl.Entry {
	if e.Use != "fallback" && e.Use != "hedge" {
		return nil
	}
	chain := a.Policy.Chains["chat"]
	named := stringList(e.Fields["models"])
	for _, in := range chain[e.Index+1:] {
		if in.Use != "fallback" && in.Use != "hedge" {
			continue
		}
		all := true
		for _, m := range a.reroute(chain[e.Index+1:in.Index], named) {
			all = all && a.ChatWhen(in, m) == Always
		}
		if all {
			return in
		}
	}
	return nil
}

// inertChatWhenNoModel reports a chat entry whose when is false for the
// calls of every declared model, wherever it sits, unless the when
// compares request.model with a constant: cel/unknown-value names that
// constant, and cel/constant a contradiction. A warning: a host may
// register a model client the policy does not declare. A when that holds
// for a declared model's provider id is named with it.
func (p *Pass) inertChatWhenNoModel(e *dsl.Entry) {
	if reads, compares := fieldTest(e.When.Source, "request", "model"); len(p.Policy.Models) == 0 || !reads || compares {
		return // no model, or cel/constant's or cel/unknown-value's to say
	}
	var ids []string
	for _, name := range p.chatModels() {
		if m := p.Policy.Models[name]; m.ID != "" && evalChatWhen(e.When.Source, m.ID) != Never {
			ids = append(ids, fmt.Sprintf("'%s', the provider's id of %s", m.ID, name))
		}
	}
	msg := fmt.Sprintf("the when of %s is false for the calls of every declared model (%s): request.model holds the name the policy gives a model, so %s never acts on them",
		e.Ref(), andList(p.chatModels()), e.Ref())
	if len(ids) > 0 {
		msg += fmt.Sprintf("; it holds for %s: test the policy's names instead (request.model == 'name')", strings.Join(ids, ", and "))
	} else {
		msg += "; make it hold for the models the layer is meant for"
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("when"), Severity: dsl.Warning, Message: msg})
}

// fieldTest reports whether the predicate src reads the field of the
// variable root (request.model, tool.name), and whether it compares it
// with a constant (==, != or in a list).
func fieldTest(src, root, field string) (reads, compares bool) {
	env, err := chatEnvironment()
	if err != nil {
		return false, false
	}
	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return false, false
	}
	isField := func(x ast.Expr) bool {
		return x.Kind() == ast.SelectKind && x.AsSelect().FieldName() == field && !x.AsSelect().IsTestOnly() &&
			x.AsSelect().Operand().Kind() == ast.IdentKind && x.AsSelect().Operand().AsIdent() == root
	}
	constant := func(x ast.Expr) bool { return x.Kind() == ast.LiteralKind || x.Kind() == ast.ListKind }
	var walk func(x ast.Expr)
	walk = func(x ast.Expr) {
		reads = reads || isField(x)
		switch x.Kind() {
		case ast.CallKind:
			c := x.AsCall()
			switch args := c.Args(); c.FunctionName() {
			case operators.Equals, operators.NotEquals, operators.In:
				if len(args) == 2 && (isField(args[0]) && constant(args[1]) || constant(args[0]) && isField(args[1])) {
					compares = true
				}
			}
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, a := range c.Args() {
				walk(a)
			}
		case ast.SelectKind:
			walk(x.AsSelect().Operand())
		case ast.ListKind:
			for _, el := range x.AsList().Elements() {
				walk(el)
			}
		case ast.ComprehensionKind:
			c := x.AsComprehension()
			walk(c.IterRange())
			walk(c.LoopCondition())
			walk(c.LoopStep())
			walk(c.Result())
		}
	}
	walk(parsed.NativeRep().Expr())
	return reads, compares
}

// inertToolWhen reports a tool-chain entry whose when reads a field of
// tool and is false for every declared tool it could apply to
// (tool.name.startsWith('refnd') where the tool is refund; size(tool.url_arg)
// > 0 where no tool declares url_arg; !tool.side_effecting scoped to a
// side-effecting tool), where only declared tools run: it never acts, an
// error at the when. A when that reads tool only to compare tool.name with
// a constant is cel/unknown-value's to report.
func (p *Pass) inertToolWhen(e *dsl.Entry) {
	if e.When == nil || p.UndeclaredToolsRun() {
		return
	}
	readsName, compares := fieldTest(e.When.Source, "tool", "name")
	readsOther := false
	for _, f := range []string{"side_effecting", "retry_safe", "url_arg", "path_arg"} {
		r, _ := fieldTest(e.When.Source, "tool", f)
		readsOther = readsOther || r
	}
	if !readsOther && (!readsName || compares) {
		return
	}
	names := e.Tools
	if len(names) == 0 {
		names = p.toolNames()
	}
	for _, name := range names {
		if p.Applies(e, name) {
			return
		}
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "`" + n + "`"
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("when"), Severity: dsl.Error,
		Message: fmt.Sprintf("the when of %s is false for every tool it could apply to (%s), and a call of a tool the policy does not declare is refused: %s never acts; make its when hold for the tools it is meant for",
			e.Ref(), andList(quoted), e.Ref())})
}

// inertMeterUSD reports a chat meter whose usd ceiling counts calls that
// cost nothing: to models declared without a price, or, when the policy
// declares no models, to every model.
func (p *Pass) inertMeterUSD(e *dsl.Entry) {
	budget, _ := e.Fields["budget"].(map[string]any)
	if _, ok := budget["usd"]; !ok {
		return
	}
	pos := e.FieldPos("budget.usd")
	var free []string
	var rel []dsl.Related
	zero := 0
	for _, name := range slices.Sorted(maps.Keys(p.Policy.Models)) {
		m := p.Policy.Models[name]
		if m.USDPerMTokIn == 0 && m.USDPerMTokOut == 0 {
			zero++
		}
		if !m.Priced {
			free = append(free, name)
			rel = append(rel, dsl.Related{Pos: m.Pos, Message: fmt.Sprintf("model %s is declared here, without usd_per_mtok_in or usd_per_mtok_out", name)})
		}
	}
	switch {
	case len(p.Policy.Models) == 0:
		p.Report(dsl.Diagnostic{Pos: pos, Severity: dsl.Error,
			Message: fmt.Sprintf("%s budget.usd counts dollars at the prices declared in models, and the policy declares no models: every call costs $0, so the ceiling is never reached; declare the models with usd_per_mtok_in and usd_per_mtok_out, or cap tokens or calls instead", e.Ref())})
	case zero == len(p.Policy.Models):
		p.Report(dsl.Diagnostic{Pos: pos, Severity: dsl.Error, Related: rel,
			Message: fmt.Sprintf("%s budget.usd counts dollars at the models' prices, and every model's is 0 or unset: every call costs $0, so the ceiling is never reached; give the models usd_per_mtok_in and usd_per_mtok_out, or cap tokens or calls instead", e.Ref())})
	case len(free) > 0 && e.When == nil:
		p.Report(dsl.Diagnostic{Pos: pos, Severity: dsl.Warning, Related: rel,
			Message: fmt.Sprintf("%s budget.usd counts dollars at the models' prices, and %s has none: its calls cost $0 and the ceiling never stops them; give it usd_per_mtok_in and usd_per_mtok_out (0 for a model that is free), or scope the meter with when: to the priced models", e.Ref(), andList(free))})
	}
}

// inertHedge reports a hedge whose backups start no sooner than a retry
// outside it (one without a when, which applies to every call the hedge
// sees) ends the attempt: the hedge's context is cancelled first, so a
// slow model is never raced. The model started k-th is due after k delays.
func (p *Pass) inertHedge(e *dsl.Entry, outside []*dsl.Entry) {
	delay, err := time.ParseDuration(stringField(e, "delay"))
	if err != nil || delay <= 0 {
		return
	}
	var retry *dsl.Entry
	var timeout time.Duration
	for _, o := range outside {
		if o.Use != "retry" || o.When != nil {
			continue
		}
		d, err := time.ParseDuration(stringField(o, "attempt_timeout"))
		if err != nil || d <= 0 || retry != nil && d >= timeout {
			continue
		}
		retry, timeout = o, d
	}
	if retry == nil {
		return
	}
	models := stringList(e.Fields["models"])
	var late []string
	for k := 1; k < len(models); k++ {
		if time.Duration(k)*delay >= timeout {
			late = append(late, models[k])
		}
	}
	if len(late) == 0 {
		return
	}
	rel := []dsl.Related{{Pos: retry.FieldPos("attempt_timeout"), Message: fmt.Sprintf("%s, outside %s, ends each attempt after %s", retry.Ref(), e.Ref(), timeout)}}
	if len(late) == len(models)-1 {
		p.Report(dsl.Diagnostic{Pos: e.FieldPos("delay"), Severity: dsl.Warning, Related: rel,
			Message: fmt.Sprintf("%s starts its next model after delay %s, but %s outside it cancels the attempt after attempt_timeout %s: no backup ever races a slow model (the hedge moves on only when a model fails at once); make delay shorter than attempt_timeout, or move %s outside %s", e.Ref(), delay, retry.Ref(), timeout, e.Ref(), retry.Ref())})
		return
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("delay"), Severity: dsl.Warning, Related: rel,
		Message: fmt.Sprintf("%s starts each next model after delay %s, but %s outside it cancels the attempt after attempt_timeout %s: %s never races a slow model; make delay shorter, or list fewer models", e.Ref(), delay, retry.Ref(), timeout, andList(late))})
}

// inertCache reports a tool-chain cache scoped to a tool it never caches:
// one the policy does not declare, or one whose results are secret.
func (p *Pass) inertCache(e *dsl.Entry) {
	for i, name := range e.Tools {
		if i >= len(e.ToolsPos) {
			break
		}
		t := p.Policy.Tools[name]
		switch {
		case t == nil:
			p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: dsl.Error,
				Message: fmt.Sprintf("%s is scoped to `%s`, which the policy does not declare: a cache serves declared tools only (it cannot know that another tool is read-only), so every call of it runs uncached; declare it under tools: (agentc mcp-tools prints the entries of an MCP server's tools), or remove it from tools:", e.Ref(), name)})
		case t.SecretResult:
			p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: dsl.Error,
				Related: []dsl.Related{{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared here, with secret_result: true", name)}},
				Message: fmt.Sprintf("%s is scoped to `%s`, whose results are secret: a cache never keeps them (it would hold the secret outside the run and serve it to other runs), so every call of it runs uncached; remove it from tools:", e.Ref(), name)})
		}
	}
}

// inertArgCheck reports an egress or file_check entry whose tools declare no
// argument for it to check.
func (p *Pass) inertArgCheck(e *dsl.Entry, field string, arg func(*dsl.Tool) string) {
	if len(e.Tools) > 0 {
		for i, name := range e.Tools {
			t := p.Policy.Tools[name]
			if t == nil || arg(t) != "" {
				continue
			}
			// egress and file_check refuse the calls of a tool their
			// tools: name that they cannot check; output_coerce lets
			// them through.
			outcome := "its calls pass unchecked"
			if field != "result_schema" {
				outcome = fmt.Sprintf("%s refuses every call of it, as it cannot tell which argument to check", e.Ref())
			}
			p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: dsl.Error,
				Related: []dsl.Related{{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared here, without %s", name, field)}},
				Message: fmt.Sprintf("%s is scoped to `%s`, which declares no %s: %s; declare %s on the tool, or remove it from tools:", e.Ref(), name, field, outcome, field)})
		}
		return
	}
	var rel []dsl.Related
	for _, name := range p.toolNames() {
		t := p.Policy.Tools[name]
		if arg(t) != "" {
			return
		}
		rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` declares no %s", name, field)})
	}
	p.Report(dsl.Diagnostic{Pos: e.UsePos, Severity: dsl.Warning, Related: rel,
		Message: fmt.Sprintf("%s checks nothing: no declared tool has %s, so every call passes it unchecked; declare %s on the tools it should check", e.Ref(), field, field)})
}

// inertOptionalArg reports a tool an egress or file_check layer checks
// whose url_arg or path_arg names an argument its args schema declares but
// does not require: the layer refuses a call without the argument (a
// missing URL or path is refused), so every call that leaves it out is
// blocked. Each tool and field is reported once (seen).
func (p *Pass) inertOptionalArg(e *dsl.Entry, seen map[string]bool) {
	field, arg, pos := "url_arg", func(t *dsl.Tool) string { return t.URLArg }, func(t *dsl.Tool) dsl.Pos { return t.URLArgPos }
	fix := "leave url_arg out, and the layer's scan_args checks a URL wherever a call writes one"
	if e.Use == "file_check" {
		field, arg, pos = "path_arg", func(t *dsl.Tool) string { return t.PathArg }, func(t *dsl.Tool) dsl.Pos { return t.PathArgPos }
		fix = "split the calls with a path and those without into two tools"
	}
	tools := e.Tools
	if len(tools) == 0 {
		tools = p.toolNames()
	}
	for _, name := range tools {
		t := p.Policy.Tools[name]
		if t == nil || seen[field+" "+name] {
			continue
		}
		a := arg(t)
		if a == "" || strings.HasPrefix(a, "/") || len(t.URLArgs) > 1 && field == "url_arg" || len(t.PathArgs) > 1 && field == "path_arg" {
			continue
		}
		if has, known := t.HasArg(a); !known || !has || t.RequiresArg(a) {
			continue
		}
		seen[field+" "+name] = true
		p.Report(dsl.Diagnostic{Pos: pos(t), Severity: dsl.Warning,
			Related: []dsl.Related{{Pos: e.UsePos, Message: fmt.Sprintf("%s checks the calls of `%s`", e.Ref(), name)}},
			Message: fmt.Sprintf("%s names argument %q, which the args of `%s` do not require: %s refuses a call without it (a missing %s is refused), so every call that leaves it out is blocked; list it in required, or %s",
				field, a, name, e.Use, map[string]string{"url_arg": "URL", "path_arg": "path"}[field], fix)})
	}
}

// inertArgPatterns reports arg_patterns entries naming an argument that no
// tool the entry applies to declares.
func (p *Pass) inertArgPatterns(e *dsl.Entry) {
	patterns, _ := e.Fields["arg_patterns"].([]any)
	tools := e.Tools
	if len(tools) == 0 {
		if p.UndeclaredToolsRun() {
			// It sees calls of tools whose arguments nothing describes.
			return
		}
		tools = p.toolNames()
	}
	if len(tools) == 0 {
		return
	}
	for i, x := range patterns {
		m, _ := x.(map[string]any)
		arg, _ := m["arg"].(string)
		if arg == "" {
			continue
		}
		var rel []dsl.Related
		declared, closed := false, true
		for _, name := range tools {
			t := p.Policy.Tools[name]
			if t == nil {
				declared = true // reported as a bad reference
				break
			}
			// The layer tries a pattern on an argument of its name in any
			// case, as a tool decoding with encoding/json reads it.
			args, known := t.ArgNames()
			if !known || slices.ContainsFunc(args, func(a string) bool { return strings.EqualFold(a, arg) }) {
				declared = true
				break
			}
			if _, ok := t.ClosedArgNames(); !ok {
				closed = false
			}
			rel = append(rel, dsl.Related{Pos: t.ArgsPos, Message: fmt.Sprintf("the args of `%s` have no %q", name, arg)})
		}
		if declared {
			continue
		}
		var names []string
		for _, name := range tools {
			args, _ := p.Policy.Tools[name].ArgNames()
			names = append(names, args...)
		}
		sev, outcome := dsl.Error, "the pattern never matches"
		if !closed {
			// An open schema lets a call carry it, and the pattern is tried on it.
			sev, outcome = dsl.Warning, "the pattern matches only a call carrying it beyond its tool's args schema, which lets one through"
		}
		p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("arg_patterns.%d.arg", i)), Severity: sev, Related: rel,
			Message: fmt.Sprintf("%s arg_patterns[%d] names argument %q, which no tool it applies to declares: %s%s", e.Ref(), i, arg, outcome, dsl.SuggestName(arg, names))})
	}
}

// inertUncheckedArgs reports, in a policy whose tool chain has layers of
// kind (egress, file_check), each declared tool that names an argument
// with field (url_arg, path_arg) and that none of them applies to: its
// tools: or when leave it out, so the URLs (paths) it is declared to take
// go unchecked. A warning at the first such layer's tools: (its when). A
// tool that a layer refuses outright (Blocker) never runs, and is not
// reported.
func (p *Pass) inertUncheckedArgs(kind, field, what string, arg func(*dsl.Tool) string) {
	var layers []*dsl.Entry
	for _, e := range p.Policy.Chains["tool"] {
		if e.Use == kind {
			layers = append(layers, e)
		}
	}
	if len(layers) == 0 {
		return
	}
	for _, name := range p.toolNames() {
		t := p.Policy.Tools[name]
		if arg(t) == "" || p.Blocker(name) != nil || slices.ContainsFunc(layers, func(e *dsl.Entry) bool { return p.Applies(e, name) }) {
			continue
		}
		e := layers[0]
		at := e.FieldPos("tools")
		if len(e.Tools) == 0 || contains(e.Tools, name) {
			at = e.FieldPos("when")
		}
		p.Report(dsl.Diagnostic{Pos: at, Severity: dsl.Warning,
			Related: []dsl.Related{{Pos: t.Pos, Message: fmt.Sprintf("`%s` declares %s %q here", name, field, arg(t))}},
			Message: fmt.Sprintf("no %s layer applies to `%s`, which declares %s %q: the %s its calls carry go unchecked; add it to the tools: of %s, or give it a layer of its own",
				kind, name, field, arg(t), what, e.Ref())})
	}
}

// inertPolicyDeny reports each name of a tool_policy's deny list that is a
// declared tool the layer never applies to: its tools: leaves it out, or
// its when is false for every call of it. The layer never sees such a
// call, so the deny never refuses it and the tool runs.
func (p *Pass) inertPolicyDeny(e *dsl.Entry) {
	for i, name := range stringList(e.Fields["deny"]) {
		if _, declared := p.Policy.Tools[name]; !declared || p.Applies(e, name) {
			continue
		}
		why := "its tools: leaves it out"
		if len(e.Tools) == 0 || contains(e.Tools, name) {
			why = "its when is false for every call of it"
		}
		p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("deny.%d", i)), Severity: dsl.Error,
			Related: []dsl.Related{{Pos: p.Policy.Tools[name].Pos, Message: fmt.Sprintf("`%s` is declared here", name)}},
			Message: fmt.Sprintf("%s denies `%s`, but never sees its calls (%s): the deny never refuses them, and `%s` runs; deny it in a tool_policy that applies to it", e.Ref(), name, why, name)})
	}
}

// inertIdempotent reports an idempotent entry that dedupes nothing (its
// tools are not side-effecting) and key_args that the side-effecting tools
// it applies to do not declare, so that every call of them is refused.
func (p *Pass) inertIdempotent(e *dsl.Entry) {
	tools := e.Tools
	if len(tools) > 0 {
		for i, name := range tools {
			t := p.Policy.Tools[name]
			if t == nil || t.SideEffecting {
				continue
			}
			p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: dsl.Error,
				Related: []dsl.Related{{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared here, without side_effecting: true", name)}},
				Message: fmt.Sprintf("%s is scoped to `%s`, which is not side_effecting: idempotent dedupes side-effecting tools only, so a duplicate call of it runs again; declare side_effecting: true on the tool, or remove it from tools:", e.Ref(), name)})
		}
	} else {
		tools = p.toolNames()
		var rel []dsl.Related
		for _, name := range tools {
			t := p.Policy.Tools[name]
			if t.SideEffecting {
				rel = nil
				break
			}
			rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` is not side_effecting", name)})
		}
		// The tools of an MCP server are side-effecting unless the server
		// marks them read-only: the layer dedupes their calls.
		if len(rel) > 0 && len(p.Policy.MCPServers) == 0 {
			p.Report(dsl.Diagnostic{Pos: e.UsePos, Severity: dsl.Warning, Related: rel,
				Message: fmt.Sprintf("%s dedupes nothing: no declared tool is side_effecting, and idempotent passes the calls of other tools through; declare side_effecting: true on the tools whose calls must run once", e.Ref())})
		}
	}
	keyArgs, _ := e.Fields["key_args"].([]any)
	for i, x := range keyArgs {
		arg, _ := x.(string)
		if arg == "" {
			continue
		}
		for _, name := range tools {
			t := p.Policy.Tools[name]
			if t == nil || !t.SideEffecting {
				continue
			}
			args, known := t.ArgNames()
			if !known {
				continue
			}
			if slices.Contains(args, arg) {
				if !t.RequiresArg(arg) {
					p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("key_args.%d", i)), Severity: dsl.Warning,
						Related: []dsl.Related{{Pos: t.ArgsPos, Message: fmt.Sprintf("the args of `%s` do not require %q", name, arg)}},
						Message: fmt.Sprintf("%s key_args[%d] names argument %q, which side-effecting tool `%s` does not require: a call without it is refused and does not run; list it in the tool's required, or key on arguments every call carries", e.Ref(), i, arg, name)})
				}
				continue
			}
			if _, closed := t.ClosedArgNames(); closed {
				continue // no call can carry it: schema/bad-reference, at load
			}
			// An open schema lets a call carry it: such a call runs.
			p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("key_args.%d", i)), Severity: dsl.Warning,
				Related: []dsl.Related{{Pos: t.ArgsPos, Message: fmt.Sprintf("the args of `%s` do not list %q", name, arg)}},
				Message: fmt.Sprintf("%s key_args[%d] names argument %q, which side-effecting tool `%s` does not declare nor require: its args schema lets a call carry it, but a call without it is refused and does not run; declare and require it, or key on arguments every call carries%s", e.Ref(), i, arg, name, dsl.SuggestName(arg, args))})
		}
	}
}

// inertMatchers warns of a content_filter, security, redact or
// tool_policy layer left with nothing to match, and of a file_check that
// confines paths to the whole file system.
func (p *Pass) inertMatchers(e *dsl.Entry) {
	none := func(field string) bool {
		list, _ := e.Fields[field].([]any)
		return len(list) == 0
	}
	var what string
	pos := e.UsePos
	switch e.Use {
	case "tool_policy":
		if e.Fields["allow"] == nil && none("deny") && none("arg_patterns") {
			what = "it has no allow list, no deny list and no arg_patterns"
		}
		if allow, ok := e.Fields["allow"].([]any); ok && len(allow) == 0 && e.When == nil && len(e.Tools) == 0 {
			p.Report(dsl.Diagnostic{Pos: e.FieldPos("allow"), Severity: dsl.Warning,
				Message: fmt.Sprintf("%s refuses every tool call: its allow is empty, and neither a when nor tools: scopes it; list the tools it lets run, or scope it to the calls it is meant to refuse", e.Ref())})
		}
	case "file_check":
		roots, _ := e.Fields["roots"].([]any)
		for i, r := range roots {
			if s, _ := r.(string); s != "" && path.Clean(s) == "/" && none("extensions") && e.Fields["max_bytes"] == nil && e.Fields["must_exist"] != true {
				what, pos = "its roots hold \"/\", inside which every path lies, and it sets no extensions, max_bytes nor must_exist (only a dangling link is refused)", e.FieldPos(fmt.Sprintf("roots.%d", i))
				break
			}
		}
	case "content_filter":
		if none("keywords") && none("patterns") {
			what = "it has neither keywords nor patterns"
		}
	case "security":
		if e.Fields["defaults"] == false && none("patterns") && e.Fields["classifier"] == nil {
			what = "defaults: false drops the built-in signatures and phrase families, and it has no patterns nor classifier of its own"
		} else {
			p.inertThreshold(e)
		}
	case "redact":
		if e.Fields["defaults"] == false && none("patterns") {
			what = "defaults: false drops the built-in secret patterns, and it has no patterns of its own"
		}
	}
	if what == "" {
		return
	}
	p.Report(dsl.Diagnostic{Pos: pos, Severity: dsl.Warning,
		Message: fmt.Sprintf("%s checks nothing: %s, so every call passes it untouched", e.Ref(), what)})
}

// inertPatterns reports each regular expression of a layer's config that
// can match no text (dsl.RegexpNeverMatches): the layer never blocks (nor
// masks) on it, and lets through what it reads as held back. A security
// layer also matches the pattern folded as it normalizes the text
// ('secret$｜jailbreak', with a full-width ｜, folds to one that matches):
// reported only where neither can match.
func (p *Pass) inertPatterns(e *dsl.Entry) {
	for _, r := range e.Regexps() {
		why, never := dsl.RegexpNeverMatches(r.Pattern)
		if !never {
			continue
		}
		if folded := security.FoldedPattern(r.Pattern); e.Use == "security" && folded != r.Pattern {
			if _, never := dsl.RegexpNeverMatches(folded); !never {
				continue
			}
		}
		p.Report(dsl.Diagnostic{Pos: e.FieldPos(r.Path), Severity: dsl.Error,
			Message: fmt.Sprintf("%s's pattern '%s' can never match: %s; %s never acts on it", e.Ref(), r.Pattern, why, e.Use)})
	}
}

// inertStatePatterns reports each pattern of a run-state field's redact
// handler that can match no text, as inertPatterns does a layer's: the
// handler never masks on it. At the handler.
func (p *Pass) inertStatePatterns() {
	if p.Policy.State == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(p.Policy.State.Fields)) {
		f := p.Policy.State.Fields[name]
		for _, h := range slices.Concat(f.OnSet, f.OnAppend) {
			for _, pat := range h.Redact {
				if why, never := dsl.RegexpNeverMatches(pat); never {
					p.Report(dsl.Diagnostic{Pos: h.Pos, Severity: dsl.Error,
						Message: fmt.Sprintf("state field %s's %s[%d] redact pattern '%s' can never match: %s; the handler never masks on it", name, h.Op, h.Index, pat, why)})
				}
			}
		}
	}
}

// inertThreshold reports a security layer whose threshold its phrase
// families can never reach: they sum to security.MaxFamilyScore at most,
// and to nothing with defaults: false. The layer still blocks on its
// signatures, patterns and classifier, so a warning.
func (p *Pass) inertThreshold(e *dsl.Entry) {
	t, ok := number(e.Fields["threshold"])
	if !ok {
		return
	}
	var msg string
	switch most := security.MaxFamilyScore(); {
	case e.Fields["defaults"] == false:
		if t == security.DefaultThreshold {
			// Unset, or set to the default: nothing to remove.
			return
		}
		msg = fmt.Sprintf("%s's threshold %g counts phrase families, which defaults: false drops: it decides nothing; remove it", e.Ref(), t)
	case math.Round(t*1e6) > math.Round(most*1e6):
		msg = fmt.Sprintf("%s's threshold %g is above %g, the most its phrase families sum to: no family blocks, only the signatures, patterns and classifier do; lower it to %g or less", e.Ref(), t, most, most)
	default:
		return
	}
	p.Report(dsl.Diagnostic{Pos: e.FieldPos("threshold"), Severity: dsl.Warning, Message: msg})
}
