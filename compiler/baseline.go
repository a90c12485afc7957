package compiler

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// RuleStateReset is the rule of a layer whose shared state a policy change
// leaves behind (agentc vet -baseline).
const RuleStateReset = "state/reset"

// RuleStateCoverage is the rule of an idempotent layer whose `when` may
// cover fewer calls than the deployed policy's (agentc vet -baseline).
const RuleStateCoverage = "state/coverage"

// baselineRules are the rules that compare a policy with what is deployed.
var baselineRules = []Rule{
	{RuleStateReset, dsl.Warning, "a change from the deployed policy (vet -baseline) leaves a layer's shared state behind", `
Reported only by agentc vet -baseline OLD, OLD being what is deployed (a
policy directory or .cue files, or a plan.json): the state of a layer
(idempotency records, budget ledgers, rate-limit buckets, cached entries)
is keyed by what the layer names, not by the policy's version, so a
change that moves the key leaves the state the deployed version kept
behind, and the new version starts afresh. Changing an idempotent layer's
key_args from ["order_id"] to ["order_id", "amount"] runs a refund made
before the change again when it is retried after it; renaming a meter, or
changing its scope, gives every tenant its whole budget again; renaming a
rate_limit, or changing its scope or limiter, gives every caller a full
burst; a memoize's scope or single_flight, or a store pointed elsewhere
(another store, or the same name with another kind, address or prefix:
another host, port or database, a redis ?db= included, but not a
password or a client option alone), empties the cache; a checkpoint's store pointed elsewhere leaves the runs
saved before unresumable; an MCP server's prefix changed renames its tools,
whose names key the idempotency records of their calls; a virtual key
given another tenant (or renamed while its tenant is its name) leaves the
records, ledgers and buckets of its calls under the old tenant, reported
at the key's tenant for each layer keyed by the tenant; keys declared
where there were none (every caller without a tenant), or all removed,
move every caller's state the same way, reported at keys (at the layer
when they are removed). The warning is at
the field that changed in the new policy, and names the tool, what starts
afresh and the store that keeps the old state. A layer is compared with
the layer of its chain with its kind and name, else, when the chain has
as many of its kind unpaired in both versions (one each, or several
renamed), with the one most like it, else with the only one of its kind
and name another chain adds (a meter moved to another chain starts afresh, its
keys naming the chain); a layer added or removed is not reported,
except an idempotent layer removed (or no longer covering a tool) while
its tool is still side-effecting: its records are left behind and a
retried call runs again. Changes that keep the keys (ttl, budget, rate, a
store renamed with the same declaration) are not reported. A layer whose
state keys cannot be read (in a program that calls
compiler.CompareBaseline, its middleware not registered there, or its
config in the baseline plan not decoding) is reported as not compared, at
the layer; agentc vet -baseline refuses, as it loads it, a plan.json whose
config does not decode. agentc serve compares a reload
the same way (docs/serve.md).`},
	{RuleStateCoverage, dsl.Warning, "a change from the deployed policy (vet -baseline) may narrow the calls an idempotent layer deduplicates", `
Reported only by agentc vet -baseline OLD: an idempotent layer given a
when, or another when, than the deployed one. A call the deployed when
covered and the new one does not is no longer deduplicated, so a refund
made before the change runs again when it is retried after it. No stored
state is lost (that is state/reset): the records stay, and are not read
for those calls. Which calls two predicates cover is not compared, so
every change of when is reported, at the new when; a when removed covers
every call and is not. agentc serve logs such a reload and applies it
(docs/serve.md).`},
}

// LoadBaseline returns the plan of the policy at path, what is deployed: a
// plan (.json) as it is, or the policy (a directory or .cue file) compiled,
// which must compile without errors.
func LoadBaseline(ctx context.Context, path string, opts Options) (*plan.Plan, error) {
	if strings.HasSuffix(path, ".json") {
		return plan.Load(path)
	}
	c, err := Compile(ctx, []string{path}, opts)
	if err != nil {
		return nil, err
	}
	if c.Plan == nil {
		var first string
		for _, d := range c.Diagnostics.Sort() {
			if d.Severity == dsl.Error {
				first = d.String()
				break
			}
		}
		return nil, fmt.Errorf("baseline %s does not compile: %s", path, first)
	}
	return c.Plan, nil
}

// CompareBaseline reports, as state/reset warnings, each layer whose state
// the policy, changed from old (the deployed plan), leaves behind
// (runtime.StateChanges), each at the field that changed, and, as
// state/coverage warnings, each idempotent layer whose when may cover fewer
// calls (runtime.CoverageChanges), at its when. A layer whose state keys
// cannot be read (runtime.StateUncompared: its middleware is not
// registered in the program, which must import the builtins,
// github.com/agentc-dev/agentc/builtins/all, or the baseline's config of
// it does not decode) is a state/reset warning too, at the layer (for one
// of the baseline only, at the start of its chain, else where the policy
// writes chains, saying which chain it was removed from), saying it could
// not be compared. A policy that did not compile to a plan is not compared.
func (c *Compilation) CompareBaseline(old *plan.Plan) {
	if c.Plan == nil || c.Policy == nil || old == nil {
		return
	}
	for _, u := range runtime.StateUncompared(old, c.Plan) {
		msg := u.Message()
		pos := c.chainPos(u.Stage)
		if e := c.entry(u.Stage, u.Layer); e != nil && e.Use == u.Use {
			// The layer of the policy, also when only the baseline's
			// could not be read.
			pos = e.Pos
		} else if len(c.Policy.Chains[string(u.Stage)]) > 0 {
			msg += "; it is removed from the " + string(u.Stage) + " chain"
		} else {
			msg += "; the policy has no " + string(u.Stage) + " chain"
		}
		c.report(dsl.Warnf(pos, RuleStateReset, "%s", msg))
	}
	for _, ch := range runtime.StateChanges(old, c.Plan) {
		c.report(dsl.Warnf(c.changePos(ch), RuleStateReset, "%s", ch.Message()))
	}
	for _, ch := range runtime.CoverageChanges(old, c.Plan) {
		pos := dsl.Pos{}
		if e := c.entry(ch.Stage, ch.Layer); e != nil && e.When != nil {
			pos = e.When.Pos
		} else if e != nil {
			pos = e.Pos
		}
		c.report(dsl.Warnf(pos, RuleStateCoverage, "%s", ch.Message()))
	}
}

// chainPos is where a layer of the baseline's chain of stage that the
// policy does not have is reported: the chain's first layer, else where
// the policy writes the chain (an empty list), else its chains, else the
// start of its first file.
func (c *Compilation) chainPos(stage plan.Stage) dsl.Pos {
	if chain := c.Policy.Chains[string(stage)]; len(chain) > 0 {
		return chain[0].Pos
	}
	return c.Policy.PosOf("chains", string(stage))
}

// entry returns the layer called name of the policy's chain of stage.
func (c *Compilation) entry(stage plan.Stage, name string) *dsl.Entry {
	for _, e := range c.Policy.Chains[string(stage)] {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// changePos is the position of the first field of ch in the policy: the
// layer's field, its name, the declaration of the store it names or of the
// MCP server whose prefix changed, the tenant of the key whose calls it
// keys differently (the key, when its tenant is its name), the keys
// declared where the baseline had none (the layer, keys removed); for a layer
// removed, the start of its chain (its first entry), else the declaration
// of the tool left without it (or of its MCP server), else where the
// policy writes chains (chainPos).
func (c *Compilation) changePos(ch runtime.StateChange) dsl.Pos {
	if k := c.Policy.Keys[ch.Key]; k != nil {
		if k.TenantPos.IsValid() {
			return k.TenantPos
		}
		return k.Pos
	}
	chain := c.Policy.Chains[string(ch.Stage)]
	entry := c.entry(ch.Stage, ch.Layer)
	if ch.Removed && len(ch.Fields) == 0 {
		switch {
		case len(chain) > 0:
			return chain[0].Pos
		case c.Policy.Tools[ch.Tool] != nil:
			return c.Policy.Tools[ch.Tool].Pos
		case c.Policy.MCPServers[ch.Server] != nil:
			return c.Policy.MCPServers[ch.Server].Pos
		}
		return c.chainPos(ch.Stage)
	}
	if entry == nil {
		return dsl.Pos{}
	}
	if len(ch.Fields) == 0 {
		return entry.Pos
	}
	f := ch.Fields[0]
	switch {
	case f == "name" && entry.NamePos.IsValid():
		return entry.NamePos
	case f == "name":
		return entry.Pos
	case strings.HasPrefix(f, "stores."):
		if s := c.Policy.Stores[strings.TrimPrefix(f, "stores.")]; s != nil {
			return s.Pos
		}
	case strings.HasPrefix(f, "mcp_servers."):
		name := strings.TrimSuffix(strings.TrimPrefix(f, "mcp_servers."), ".prefix")
		if s := c.Policy.MCPServers[name]; s != nil {
			return s.Pos
		}
	case f == "keys" && c.Policy.KeysPos.IsValid():
		return c.Policy.KeysPos
	case f == "settings.digest_key_env" && c.Policy.DigestKeyEnvPos.IsValid():
		return c.Policy.DigestKeyEnvPos
	case f == "tools" && len(entry.ToolsPos) > 0:
		return entry.ToolsPos[0]
	}
	return entry.FieldPos(f)
}
