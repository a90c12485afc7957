package serve

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// celString matches a CEL string literal (single or double quoted, without
// escapes), as a predicate compares tool.name to one.
var celString = regexp.MustCompile(`'([^'\\]*)'|"([^"\\]*)"`)

// checkToolNames refuses a policy that names a tool by the name an upstream
// MCP server gives it when the server's prefix makes the tool chain see it
// under another: a tools: declaration, a layer's tools scope, a
// tool_policy allow or deny entry, or a string in a tool layer's predicate
// (guard, when) naming "read_file" while the chain sees "fs_read_file"
// would silently not apply (a deny, a guard, a path_arg check) to the
// tool it was written for. host are the tools the host serves under their
// own names.
func checkToolNames(p *plan.Plan, u *upstreams, host map[string]bool) error {
	// renamed maps an upstream tool's own name to the names the chain sees
	// it under, when no tool is exposed under that name itself.
	renamed := map[string][]string{}
	for exposed, t := range u.tools {
		if exposed != t.name {
			renamed[t.name] = append(renamed[t.name], exposed)
		}
	}
	if len(renamed) == 0 {
		return nil
	}
	check := func(where, name string) error {
		as, ok := renamed[name]
		if !ok || u.tools[name] != nil || host[name] {
			return nil
		}
		sort.Strings(as)
		t := u.tools[as[0]]
		return fmt.Errorf("%s names tool %q, which mcp server %q serves as %q (its prefix %q): the tool chain sees a tool by the name it is served under, so the rule would not apply to it; write %q",
			where, name, t.server, as[0], p.MCPServers[t.server].Prefix, as[0])
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		if err := check("tools."+name, name); err != nil {
			return err
		}
	}
	for i, l := range p.Chains.Of(plan.StageTool) {
		at := layerAt(i, l)
		for _, name := range l.Tools {
			if err := check(at+" tools", name); err != nil {
				return err
			}
		}
		if l.Use == "tool_policy" {
			var cfg struct{ Allow, Deny []string }
			if err := json.Unmarshal(l.Config, &cfg); err == nil {
				for _, name := range cfg.Allow {
					if err := check(at+" allow", name); err != nil {
						return err
					}
				}
				for _, name := range cfg.Deny {
					if err := check(at+" deny", name); err != nil {
						return err
					}
				}
			}
		}
		for _, ps := range predicateStrings(l) {
			if err := check(at+" "+ps.key, ps.s); err != nil {
				return err
			}
		}
	}
	return nil
}

// layerRef is a layer's name, else its module id.
func layerRef(l plan.Layer) string {
	if l.Name != "" {
		return l.Name
	}
	return l.Use
}

// predicateString is a string literal of a layer's predicate.
type predicateString struct {
	key string // the predicate: "when", "deny", "require"...
	s   string
}

// predicateStrings returns the string literals of l's predicates (its when
// and the others), the predicates in order of their keys.
func predicateStrings(l plan.Layer) []predicateString {
	var out []predicateString
	for _, p := range layerPredicates(l) {
		for _, m := range celString.FindAllStringSubmatch(p.src, -1) {
			out = append(out, predicateString{p.key, m[1] + m[2]})
		}
	}
	return out
}

// keyedPredicate is a predicate of a layer and its key; namePos are the
// positions of the strings it tests tool.name with
// (plan.Predicate.NamePos).
type keyedPredicate struct {
	key, src string
	namePos  map[string]string
}

// layerPredicates returns l's predicates, its when and the others, in
// order of their keys.
func layerPredicates(l plan.Layer) []keyedPredicate {
	preds := map[string]*plan.Predicate{"when": l.When}
	maps.Copy(preds, l.Predicates)
	var out []keyedPredicate
	for _, k := range slices.Sorted(maps.Keys(preds)) {
		if preds[k] != nil {
			out = append(out, keyedPredicate{k, preds[k].Source, preds[k].NamePos})
		}
	}
	return out
}
