package serve

import (
	"cmp"
	"encoding/json"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// memoryTrails returns the audit layers of p (as CHAIN:NAME) whose sink is in
// process memory (a store of kind memory, or the default store when the
// policy declares none): a trail that is not durable (it is lost when the
// process ends) and keeps only the last runtime.DefaultMemoryAuditMax
// records. A sink the host passes in deps counts as it is. The gateway
// never runs a turn, nor a tool when runsTools is false (no mcp servers, no
// host tools: Server.runsTools): an audit layer of the turn chain, or of
// the tool chain then, writes no record, and is left to the warnings about
// layers that never act.
func memoryTrails(p *plan.Plan, deps runtime.Deps, runsTools bool) []string {
	if !runsTools {
		return nil
	}
	var out []string
	for _, l := range p.Chains.Tool {
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
				out = append(out, "tool:"+l.Name)
			}
		} else if (!declared && cfg.Sink == runtime.DefaultStore) || st.Kind == "memory" {
			out = append(out, "tool:"+l.Name)
		}
	}
	return out
}

// runOnlyToolLayers returns the names of the tool-chain layers of p that
// act only on a call that runs (an audit record, a result redacted, a
// phase "after" guard...), when the gateway runs no tool (runsTools is
// false: no mcp servers, no host tools): it then admits the calls a model
// proposes with the layers that decide a call alone (tool_policy, egress,
// file_check, pii, guards of phase "before"). A layer of a middleware the
// host registers is not named: it may admit calls too.
func runOnlyToolLayers(p *plan.Plan, runsTools bool) []string {
	if runsTools {
		return nil
	}
	var out []string
	for _, l := range p.Chains.Tool {
		switch l.Use {
		case "guard":
			var cfg struct {
				Phase string `json:"phase"`
			}
			_ = json.Unmarshal(l.Config, &cfg)
			if cfg.Phase != "after" {
				continue
			}
		case "audit", "idempotent", "meter", "rate_limit", "retry", "memoize", "semantic_memoize", "redact", "truncate", "output_coerce":
		default:
			continue
		}
		out = append(out, cmp.Or(l.Name, l.Use))
	}
	return out
}

// gatewayChain is a chain whose layers the gateway runs: the chat chain,
// and the tool chain when it runs tools (mcp servers or host tools;
// without them it runs none: runOnlyToolLayers).
type gatewayChain struct {
	stage  string
	layers []plan.Layer
}

// gatewayChains returns the chains of p the gateway runs (runsTools:
// Server.runsTools).
func gatewayChains(p *plan.Plan, runsTools bool) []gatewayChain {
	chains := []gatewayChain{{"chat", p.Chains.Chat}}
	if runsTools {
		chains = append(chains, gatewayChain{"tool", p.Chains.Tool})
	}
	return chains
}

// scopeOf returns the scope a layer's config sets, and whether it sets a
// budget.
func scopeOf(l plan.Layer) (scope string, budget bool) {
	var cfg struct {
		Scope  string          `json:"scope"`
		Budget json.RawMessage `json:"budget"`
	}
	_ = json.Unmarshal(l.Config, &cfg)
	return cfg.Scope, len(cfg.Budget) > 0 && string(cfg.Budget) != "null"
}

// runScopedLimits returns the rate_limit layers of p's chat and tool chains
// of scope "run" (as CHAIN:NAME): the gateway gives a request that names no
// run a run of its own, so such a limit starts each of them with a full
// bucket. A tool-chain one is left out when the gateway runs no tool: it
// never acts then, as runOnlyToolLayers names it.
func runScopedLimits(p *plan.Plan, runsTools bool) []string {
	var out []string
	for _, c := range gatewayChains(p, runsTools) {
		for _, l := range c.layers {
			if scope, _ := scopeOf(l); l.Use == "rate_limit" && scope == "run" {
				out = append(out, c.stage+":"+cmp.Or(l.Name, l.Use))
			}
		}
	}
	return out
}

// runKeyedIdempotency returns the idempotent layers of p's tool chain
// without key_args when the gateway runs tools: such a layer keys a call
// that names no key of its own (Idempotency-Key) on its run, and each MCP
// session is a run of its own, so a call sent again on another session (its
// replica gone, its session expired or closed) runs again.
func runKeyedIdempotency(p *plan.Plan, runsTools bool) []string {
	if !runsTools {
		return nil
	}
	var out []string
	for _, l := range p.Chains.Tool {
		var cfg struct {
			KeyArgs []string `json:"key_args"`
		}
		_ = json.Unmarshal(l.Config, &cfg)
		if l.Use == "idempotent" && len(cfg.KeyArgs) == 0 {
			out = append(out, cmp.Or(l.Name, l.Use))
		}
	}
	return out
}

// runScopedBudgets returns the meters with a budget of scope "run" (as
// CHAIN:NAME) of the chains of p whose every budget is of that scope: the
// gateway gives a request that names no run a run of its own, so each
// such request starts with a whole budget and no caller is held to one.
func runScopedBudgets(p *plan.Plan, runsTools bool) []string {
	var out []string
	for _, c := range gatewayChains(p, runsTools) {
		var run []string
		caller := false
		for _, l := range c.layers {
			scope, budget := scopeOf(l)
			switch {
			case l.Use != "meter" || !budget:
			case scope == "" || scope == "run": // "": the meter's default
				run = append(run, c.stage+":"+cmp.Or(l.Name, l.Use))
			default:
				caller = true
			}
		}
		if !caller {
			out = append(out, run...)
		}
	}
	return out
}
