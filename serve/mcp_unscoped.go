package serve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// maxNamedTools is how many tools checkUnscopedLayers names in its error.
const maxNamedTools = 8

// checkUnscopedLayers refuses a policy whose file_check layer, or egress
// layer with scan_args false, applies to every tool (no tools:) while no
// tool an upstream serves is declared with path_arg (url_arg): the layer
// checks nothing of their calls, which pass it unchecked, as they would
// through a policy written before agentc mcp-tools is run. vet only warns
// of it (guard/inert), not knowing the upstream's tools. With one served
// tool declared so, the layer checks that tool's calls, and the others
// are the policy's to declare (as they are without upstreams).
func checkUnscopedLayers(p *plan.Plan, u *upstreams) error {
	if len(u.names) == 0 {
		return nil
	}
	var errs []error
	for i, l := range p.Chains.Of(plan.StageTool) {
		field := argCheckField(l)
		if field == "" || len(l.Tools) > 0 {
			continue
		}
		if slices.ContainsFunc(u.names, func(name string) bool {
			decl, ok := p.Tools[name]
			return ok && declaresArg(decl, field)
		}) {
			continue
		}
		names := u.names // sorted
		listed := strings.Join(names[:min(len(names), maxNamedTools)], ", ")
		if more := len(names) - maxNamedTools; more > 0 {
			listed += fmt.Sprintf(" and %d more", more)
		}
		errs = append(errs, fmt.Errorf("%s checks nothing of the calls of the tools mcp servers serve: none of them (%s) is declared with %s, so every call would pass it unchecked; declare the tools it should check with %s (agentc mcp-tools prints the declarations), or scope it with tools: to the tools it checks",
			layerAt(i, l), listed, field, field))
	}
	return errors.Join(errs...)
}
