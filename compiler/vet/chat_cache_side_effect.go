package vet

import (
	"fmt"
	"slices"

	"github.com/google/cel-go/cel"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ChatCacheSideEffect reports a chat-chain cache in a policy whose tools
// include side-effecting ones.
var ChatCacheSideEffect = &Rule{
	Name:     "order/chat-cache-side-effect",
	Severity: dsl.Warning,
	Doc: `a chat-chain memoize or semantic_memoize in a policy with side-effecting tools.

An answer of the model that calls a tool makes the agent (or a gateway's
client) run the call: replayed from a cache, it would run it for a request
the model did not propose it for: the transfer of 100 EUR a second time, or
for a request of 900 EUR that scores as a near-duplicate, or, with scope key
or global, another run's. So a chat cache never stores nor replays an
answer that calls a side-effecting tool or one the policy does not declare
(memoize replays the calls of read-only tools, each under an id of its
own), and semantic_memoize lets every conversation that holds a tool call
or result through uncached (its answer reports on the result, and a
near-duplicate conversation holds another). Those turns always reach the
model: the warning says which tools make the cache do less than it seems
to, at the cache, with the tools' declarations. To keep the cache for the
requests it can answer (questions to a model offered no tools, or only
read-only ones), give it a when that keeps it off requests offering the
side-effecting tools: when: "size(request.tools) == 0", or
when: "!request.tools.exists(t, t.name in ['transfer', 'notify'])"
(request.tools are the tools the request offers: under agentc serve,
the client's; a pipeline's request that sets none is offered every
declared tool unless the host sets Deps.NoDeclaredTools). A tool
counts unless the when is false, for every declared model, for a request
offering that tool alone and for one offering every declared tool (vet
reads the tools' names, nothing else of the request). Tools refused
outright by the tool chain (a tool_policy, a guard that always denies) do
not count: no answer calling them runs. The tool chain's caches are
order/memoize-side-effect's.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["chat"] {
			if e.Use != "memoize" && e.Use != "semantic_memoize" {
				continue
			}
			offered := p.chatCacheOffered(e)
			var bad []*dsl.Tool
			var rel []dsl.Related
			for _, name := range p.toolNames() {
				t := p.Policy.Tools[name]
				if t.SideEffecting && p.Blocker(name) == nil && offered(name) {
					bad = append(bad, t)
					rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared side_effecting here", t.Name)})
				}
			}
			if len(bad) == 0 {
				continue
			}
			also := ""
			if e.Use == "semantic_memoize" {
				also = ", and no conversation holding a tool call or result is looked up"
			}
			p.Reportf(e.Pos, rel, "%s in the chat chain never stores nor replays an answer calling side-effecting %s %s (a replay would run the call again, for a request the model did not propose it for)%s: those turns always reach the model; give it a when that keeps it off requests offering %s (when: \"size(request.tools) == 0\") to cache only the requests it can answer",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), also, plural(len(bad), "it", "them"))
		}
	},
}

// chatCacheOffered returns whether the chat entry e can see a request
// offering the declared tool name: unless its when is false, for every
// declared model, for a request offering that tool alone and for one
// offering every declared tool, its other fields unknown (a when that
// reads more of a tool than its name, or of the request than its model and
// tools, depends on the call: the tool counts).
func (p *Pass) chatCacheOffered(e *dsl.Entry) func(name string) bool {
	always := func(string) bool { return true }
	if e.When == nil {
		return always
	}
	env, err := chatEnvironment()
	if err != nil {
		return always
	}
	ast, issue := checkPredicate(env, e.When.Source)
	if issue != nil { // compile-cel reports it
		return always
	}
	prg, err := env.Program(ast, append([]cel.ProgramOption{cel.EvalOptions(cel.OptPartialEval)}, programOptions...)...)
	if err != nil {
		return always
	}
	all := p.toolNames()
	return func(name string) bool {
		for _, model := range p.chatModels() {
			for _, tools := range [][]string{{name}, all} {
				if v, known := evalOffering(prg, model, tools); !known || v {
					return true
				}
			}
		}
		return false
	}
}

// evalOffering evaluates prg, a chat when, for a request of model ("":
// unknown) offering tools, by name, everything else unknown.
func evalOffering(prg cel.Program, model string, tools []string) (value, known bool) {
	offered := make([]any, len(tools))
	for i, n := range tools {
		offered[i] = map[string]any{"name": n}
	}
	request := map[string]any{"tools": offered}
	unknowns := slices.Clone(offeringUnknowns)
	if model != "" {
		request["model"] = model
	} else {
		unknowns = append(unknowns, cel.AttributePattern("request").QualString("model"))
	}
	return evalPartialBool(prg, map[string]any{"request": request}, unknowns)
}

// offeringUnknowns are what evalOffering does not know of a chat call: the
// chat stage's variables but request, and the request's fields but its
// model and tools.
var offeringUnknowns = func() []*cel.AttributePatternType {
	var out []*cel.AttributePatternType
	for _, v := range predicate.Variables(predicate.Chat) {
		if v.Name != "request" {
			out = append(out, cel.AttributePattern(v.Name))
		}
	}
	fields, _ := predicate.ObjectFields("agentc.request")
	for _, f := range fields {
		if f.Name != "model" && f.Name != "tools" {
			out = append(out, cel.AttributePattern("request").QualString(f.Name))
		}
	}
	return out
}()
