package vet

import "github.com/agentc-dev/agentc/dsl"

// UndeclaredTools reports a tool chain in a policy that declares no tools:
// the runtime refuses every call to an undeclared tool.
var UndeclaredTools = &Rule{
	Name:     "guard/undeclared-tools",
	Severity: dsl.Warning,
	Doc: `a tool chain in a policy that declares no tools, so every tool call is refused.

The runtime checks each tool call against the policy's tool declarations
before any layer runs: a call to a tool the policy does not declare is
refused (blocked by "tools") unless settings.allow_undeclared_tools is
true. A policy with a tool chain, no tools:, no mcp servers (whose tools
agentc serve declares from their schemas) and the setting off therefore
refuses every tool call, unless the host declares the tools itself
(runtime.Deps.ToolArgs). Declare the tools with their args schemas, which
also lets vet type the guards against them.`,
	Run: func(p *Pass) {
		pol := p.Policy
		chain := pol.Chains["tool"]
		if len(chain) == 0 || len(pol.Tools) > 0 || len(pol.MCPServers) > 0 || pol.AllowUndeclaredTools {
			return
		}
		p.Reportf(chain[0].Pos, nil, "the policy declares no tools: every call through the tool chain is refused before %s runs; declare the tools in tools: (with their args schemas), or set settings.allow_undeclared_tools: true to let undeclared tools run unchecked",
			chain[0].Ref())
	},
}
