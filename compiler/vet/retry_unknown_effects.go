package vet

import (
	"fmt"
	"sort"

	"github.com/agentc-dev/agentc/dsl"
)

// RetryUnknownEffects reports an unscoped retry on the tool chain of a
// policy whose tools may include ones of unknown effects (undeclared tools,
// MCP tools): the runtime does not run those again after a failure that
// may have come after their effect.
var RetryUnknownEffects = &Rule{
	Name:     "order/retry-unknown-effects",
	Severity: dsl.Warning,
	Doc: `an unscoped retry on the tool chain of a policy that lets tools of unknown effects run: the retry does not run those again.

A tool the policy does not declare has no declaration of its effects: one
that settings.allow_undeclared_tools lets run, or an mcp server's tool
(under agentc serve) that is neither declared in tools: nor annotated
readOnlyHint: true (or idempotentHint: true) by its server. The runtime
takes such a tool as side-effecting and not retry_safe, so a retry returns
its failure instead of running it again, unless the failure proves the
call did not act (refused by an inner layer, an open breaker, a
connection refused before the request was sent). A retry without tools:
or when: reads as retrying every tool call; for these it does not.
Declare the tools to retry (tools: {name: {}} for a read-only one,
retry_safe: true for one that passes its idempotency key downstream), or
scope the retry with tools:.`,
	Run: func(p *Pass) {
		pol := p.Policy
		var rel []dsl.Related
		if pol.AllowUndeclaredTools {
			rel = append(rel, dsl.Related{Pos: pol.AllowUndeclaredToolsPos, Message: "settings.allow_undeclared_tools lets undeclared tools run"})
		}
		names := make([]string, 0, len(pol.MCPServers))
		for name := range pol.MCPServers {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			rel = append(rel, dsl.Related{Pos: pol.MCPServers[name].Pos, Message: fmt.Sprintf("mcp server %q serves tools the policy may not declare", name)})
		}
		if len(rel) == 0 {
			return
		}
		for _, e := range pol.Chains["tool"] {
			if e.Use != "retry" || Attempts(e) <= 1 || len(e.Tools) > 0 || e.When != nil {
				continue
			}
			p.Reportf(e.Pos, rel, "%s retries every tool call, but a tool of unknown effects (an undeclared tool, an mcp tool the policy does not declare and its server does not annotate readOnlyHint or idempotentHint) is taken as side-effecting and not retry_safe at run time: %s does not run it again after a failure that may have come after its effect; declare the tools to retry in tools: (read-only, or retry_safe: true), or scope %s with tools:",
				e.Ref(), e.Ref(), e.Ref())
		}
	},
}
