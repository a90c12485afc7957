package compiler

import (
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// lowerServe writes the virtual API keys and the upstream MCP servers of
// `agentc serve` into the plan. Keys keep their hash or variable name only.
func lowerServe(p *dsl.Policy, out *plan.Plan, pos func(dsl.Pos) string) {
	if len(p.Keys) > 0 {
		out.Keys = map[string]plan.Key{}
		for name, k := range p.Keys {
			out.Keys[name] = plan.Key{SHA256: k.SHA256, Env: k.Env, Tenant: k.Tenant}
		}
	}
	if len(p.MCPServers) > 0 {
		out.MCPServers = map[string]plan.MCPServer{}
		for name, s := range p.MCPServers {
			out.MCPServers[name] = plan.MCPServer{Command: s.Command, URL: s.URL, Env: s.Env, Prefix: s.Prefix, Headers: s.Headers,
				Session: s.Session, MaxSessions: s.MaxSessions, Pos: pos(s.Pos)}
		}
	}
}
