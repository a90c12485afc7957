package serve

import (
	"encoding/json"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// memoryTrails returns the audit layers of p (as CHAIN:NAME) whose sink is in
// process memory (a store of kind memory, or the default store when the
// policy declares none): a trail that is not durable (it is lost when the
// process ends) and keeps only the last runtime.DefaultMemoryAuditMax
// records. A sink the host passes in deps counts as it is.
func memoryTrails(p *plan.Plan, deps runtime.Deps) []string {
	var out []string
	type staged struct {
		stage string
		plan.Layer
	}
	var layers []staged
	for _, l := range p.Chains.Tool {
		layers = append(layers, staged{"tool", l})
	}
	for _, l := range p.Chains.Turn {
		layers = append(layers, staged{"turn", l})
	}
	for _, l := range layers {
		if l.Use != "audit" {
			continue
		}
		var cfg struct {
			Sink string `json:"sink"`
		}
		_ = json.Unmarshal(l.Config, &cfg)
		if cfg.Sink == "" {
			cfg.Sink = runtime.DefaultStore
		}
		st, declared := p.Stores[cfg.Sink]
		var host any
		switch {
		case deps.AuditSinks[cfg.Sink] != nil:
			host = deps.AuditSinks[cfg.Sink]
		case cfg.Sink == runtime.DefaultStore && deps.Audit != nil:
			host = deps.Audit
		case declared && deps.Backends[cfg.Sink] != nil:
			host = deps.Backends[cfg.Sink]
		}
		if host != nil {
			if runtime.InProcess(host) {
				out = append(out, l.stage+":"+l.Name)
			}
		} else if (!declared && cfg.Sink == runtime.DefaultStore) || st.Kind == "memory" {
			out = append(out, l.stage+":"+l.Name)
		}
	}
	return out
}
