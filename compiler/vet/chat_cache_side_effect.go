package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
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
to, at the cache, with the tools' declarations. Tools refused outright by
the tool chain (a tool_policy, a guard that always denies) do not count:
no answer calling them runs. The tool chain's caches are
order/memoize-side-effect's.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["chat"] {
			if e.Use != "memoize" && e.Use != "semantic_memoize" {
				continue
			}
			var bad []*dsl.Tool
			var rel []dsl.Related
			for _, name := range p.toolNames() {
				t := p.Policy.Tools[name]
				if t.SideEffecting && p.Blocker(name) == nil {
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
			p.Reportf(e.Pos, rel, "%s in the chat chain never stores nor replays an answer calling side-effecting %s %s (a replay would run the call again, for a request the model did not propose it for)%s: those turns always reach the model",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), also)
		}
	},
}
