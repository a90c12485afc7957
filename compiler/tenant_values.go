package compiler

import (
	"slices"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// metaKeyValues returns what run.meta.tenant and run.meta.key may hold
// where the policy declares keys: agentc serve sets them to the tenant and
// the name of the key it admitted. A warning, as for request.model: a
// host embedding agentc sets run.meta as it likes. Without keys nothing is
// known: the host names the tenant.
func (c *Compilation) metaKeyValues(path string, stage predicate.Stage) (valueSet, bool) {
	p := c.Policy
	if len(p.Keys) == 0 || stage == invariantStage {
		return valueSet{}, false
	}
	var values []string
	what := "the tenants the declared keys name"
	for _, name := range sortedNames(p.Keys) {
		v := name
		if path == "run.meta.tenant" {
			v = p.Keys[name].Tenant
		}
		if !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	if path == "run.meta.key" {
		what = "the declared keys"
	}
	slices.Sort(values)
	return valueSet{values: values, what: what, why: "; agentc serve gives no other", sev: dsl.Warning}, true
}
