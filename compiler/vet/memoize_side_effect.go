package vet

import "github.com/agentc-dev/agentc/dsl"

// MemoizeSideEffect reports a cache that can apply to a side-effecting
// tool.
var MemoizeSideEffect = &Rule{
	Name:     "order/memoize-side-effect",
	Severity: dsl.Error,
	Doc: `memoize or semantic_memoize can apply to a side-effecting tool.

A cache answers a repeated call from what it stored instead of running it:
for a side-effecting tool the second refund or email would silently not
happen. The runtime never caches such a tool, so the layer is at best dead
weight for it and at worst a sign that the tool was meant to be read-only.
Scope the cache with tools: to read-only tools, or give it a when that
excludes them (when: "!tool.side_effecting" is understood). Tools that no
call can bring to the cache (scoped out, refused outright) do not count.
A chat-chain cache, which sees the model's answers calling the tools, is
order/chat-cache-side-effect's.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			if e.Use != "memoize" && e.Use != "semantic_memoize" {
				continue
			}
			bad, rel := p.sideEffectingReaching(e)
			if len(bad) == 0 {
				continue
			}
			p.Reportf(e.Pos, rel, "%s can apply to side-effecting %s %s: a repeated call would be answered from the cache instead of performing its effect (the runtime refuses to cache it, so the layer does nothing there); scope %s with tools: to read-only tools",
				e.Ref(), plural(len(bad), "tool", "tools"), toolList(bad), e.Ref())
		}
	},
}
