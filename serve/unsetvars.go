package serve

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/agentc-dev/agentc/internal/envtmpl"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// unsetVariables names the variables p's MCP servers' headers and env read
// (through lookup, as they connect) and its stores' url_env read (from the
// process's environment, as the stores open) that are unset or empty, so
// that a start failing for want of variables names all of them at once:
// mcp is the servers', stores the stores' (and settings.digest_key_env,
// which Build reads). The headers and env are read
// whenever the server connects, so one unset fails every start; a store's
// url_env only when a layer opens the store.
func unsetVariables(p *plan.Plan, lookup func(string) (string, bool)) (mcp, stores []error) {
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
	for _, name := range slices.Sorted(maps.Keys(p.Stores)) {
		s := p.Stores[name]
		if s.URL != "" || s.URLEnv == "" {
			continue
		}
		if os.Getenv(s.URLEnv) == "" {
			stores = append(stores, fmt.Errorf("store %q: environment variable %s (its url_env) is not set", name, s.URLEnv))
		}
	}
	if k := p.Settings.DigestKeyEnv; k != "" && os.Getenv(k) == "" {
		// Read from the process's environment by runtime.Build, as the
		// stores' url_env.
		stores = append(stores, fmt.Errorf("settings.digest_key_env: environment variable %s is not set", k))
	}
	return mcp, stores
}
