package serve

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentc-dev/agentc/internal/envtmpl"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// unsetVariables names the variables p's MCP servers' headers and env read
// (through lookup, as they connect) that are unset or empty: as they are
// read whenever a server connects, one unset fails every start. The start
// names them with the callers' keys', the models' and those
// runtime.UnsetVariables names (the stores' url_env, the webhook sinks',
// settings.digest_key_env), so that a start failing for want of variables
// names all of them at once.
func unsetVariables(p *plan.Plan, lookup func(string) (string, bool)) []error {
	var mcp []error
	for _, name := range slices.Sorted(maps.Keys(p.MCPServers)) {
		s := p.MCPServers[name]
		for _, f := range []struct {
			field  string
			values map[string]string
		}{{"header", s.Headers}, {"env", s.Env}} {
			for _, k := range slices.Sorted(maps.Keys(f.values)) {
				vars, err := envtmpl.Vars(f.values[k])
				if err != nil {
					continue // connecting reports it
				}
				for _, v := range vars {
					if val, ok := lookup(v); !ok || val == "" {
						mcp = append(mcp, fmt.Errorf("mcp server %q: %s %s: environment variable %s is not set", name, f.field, k, v))
					}
				}
			}
		}
	}
	return mcp
}
