package serve

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// checkScopedLayers refuses a policy whose file_check layer, or egress
// layer with scan_args false, is scoped by tools: to an upstream tool it
// cannot check: one the policy does not declare with path_arg (url_arg).
// vet refuses this for a declared tool (the inert rule); a tool only an
// upstream lists has neither, so the layer would check nothing of its
// calls. (A tool an upstream adds after the load is refused at each call
// by the layer itself.) Every such scope is named, with the layer's
// position.
func checkScopedLayers(p *plan.Plan, u *upstreams) error {
	var errs []error
	for i, l := range p.Chains.Of(plan.StageTool) {
		field := argCheckField(l)
		if field == "" {
			continue
		}
		for _, name := range l.Tools {
			t := u.tools[name]
			if t == nil {
				continue
			}
			if decl, ok := p.Tools[name]; ok && declaresArg(decl, field) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s is scoped to tool %q, which mcp server %q serves and the policy does not declare with %s: its calls would pass unchecked; declare tools: %s with %s (agentc mcp-tools prints the declaration), or remove it from tools:",
				layerAt(i, l), name, t.server, field, name, field))
		}
	}
	return errors.Join(errs...)
}

// argCheckField returns the declaration field a tool layer needs to check
// a tool: path_arg for file_check, url_arg for egress without scan_args
// (with it, every URL of a call is checked); "" for another layer.
func argCheckField(l plan.Layer) string {
	switch l.Use {
	case "file_check":
		return "path_arg"
	case "egress":
		var cfg struct {
			ScanArgs *bool `json:"scan_args"`
		}
		if json.Unmarshal(l.Config, &cfg) == nil && cfg.ScanArgs != nil && !*cfg.ScanArgs {
			return "url_arg"
		}
	}
	return ""
}

// declaresArg reports whether t declares field (path_arg or url_arg).
func declaresArg(t plan.Tool, field string) bool {
	if field == "path_arg" {
		return t.PathArg != "" || len(t.PathArgs) > 0
	}
	return t.URLArg != "" || len(t.URLArgs) > 0
}

// layerAt names the i-th layer l of the tool chain, after its position in
// the policy when it has one: "policy.cue:7:3: chains.tool[1] \"file_check\"".
func layerAt(i int, l plan.Layer) string {
	at := fmt.Sprintf("chains.tool[%d] %q", i, layerRef(l))
	if l.Pos != "" {
		at = l.Pos + ": " + at
	}
	return at
}
