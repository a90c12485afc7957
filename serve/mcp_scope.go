package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/textdist"
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

// unknownToolNames checks the names the policy's tool-chain layers are
// scoped to (tools:) and its tool_policy layers allow or deny against the
// tools served (by the upstreams, the host) and declared: a name that is
// neither applies to no tool served. One close to a tool served or declared
// (textdist.Closest: a misspelling, another case) is an error naming the
// tool meant; the others are warnings: a deny may be kept for a tool an
// upstream may add. A name an upstream gives a tool served under its
// prefix is left to checkToolNames. Nothing is checked without upstreams:
// the tools a client runs are not known here.
func unknownToolNames(p *plan.Plan, u *upstreams, host map[string]bool) (errs []error, warns []string) {
	if len(u.servers) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	own := map[string]bool{}
	for name, t := range u.tools {
		known[name], own[t.name] = true, true
	}
	for name := range host {
		known[name] = true
	}
	for name := range p.Tools {
		known[name] = true
	}
	candidates := slices.Sorted(maps.Keys(known))
	for i, l := range p.Chains.Of(plan.StageTool) {
		check := func(field string, names []string) {
			for j, name := range names {
				if known[name] || own[name] {
					continue
				}
				at := fmt.Sprintf("%s %s[%d] names tool %q, which no mcp server serves and the policy does not declare", layerAt(i, l), field, j, name)
				if best := textdist.Closest(name, candidates); best != "" {
					errs = append(errs, fmt.Errorf("%s: did you mean %q? (for a tool not served yet, declare it in tools:)", at, best))
				} else {
					warns = append(warns, at)
				}
			}
		}
		check("tools", l.Tools)
		if l.Use == "tool_policy" {
			var cfg struct{ Allow, Deny []string }
			if json.Unmarshal(l.Config, &cfg) == nil {
				check("allow", cfg.Allow)
				check("deny", cfg.Deny)
			}
		}
		for _, pred := range layerPredicates(l) {
			e, w := unknownNameTests(i, l, pred, known, own, candidates)
			errs, warns = append(errs, e...), append(warns, w...)
		}
	}
	return errs, warns
}

// unknownNameTests checks the strings the predicate pred of the i-th tool
// layer l tests tool.name with as unknownToolNames checks a layer's names:
// a name compared (==, !=, in) that is neither served nor declared, or a
// startsWith, endsWith, contains or matches that holds for no such name,
// never holds, and a guard with it never fires. One close to a name (for
// startsWith, endsWith: to a part of one, nearAffix) is an error, at the
// string's position when the plan gives it, naming what was meant.
func unknownNameTests(i int, l plan.Layer, pred keyedPredicate, known, own map[string]bool, candidates []string) (errs []error, warns []string) {
	where := func(v string) string {
		if pos := pred.namePos[v]; pos != "" {
			return fmt.Sprintf("%s: chains.tool[%d] %q %s", pos, i, layerRef(l), pred.key)
		}
		return layerAt(i, l) + " " + pred.key
	}
	report := func(at, best string) {
		if best != "" {
			errs = append(errs, fmt.Errorf("%s: did you mean %q? (for a tool not served yet, declare it in tools:)", at, best))
		} else {
			warns = append(warns, at)
		}
	}
	// A tool served under the name in another case or form is withheld
	// (lookAlikes), its calls refused: the name is the policy's, not a slip.
	names, rules := toolNameRules(pred.src)
	for _, v := range names {
		variant := slices.ContainsFunc(candidates, func(c string) bool { return foldToolName(c) == foldToolName(v) })
		if !known[v] && !own[v] && !variant {
			report(fmt.Sprintf("%s compares tool.name with %q, which no mcp server serves and the policy does not declare", where(v), v), textdist.Closest(v, candidates))
		}
	}
	for _, r := range rules {
		if slices.ContainsFunc(candidates, r.appliesFolded) || slices.ContainsFunc(slices.Collect(maps.Keys(own)), r.applies) {
			continue
		}
		report(fmt.Sprintf("%s: %s holds for no tool an mcp server serves or the policy declares", where(r.s), r.src), nearAffix(r, candidates))
	}
	return errs, warns
}

// minAffix is the length from which a startsWith or endsWith string that
// holds for no name is read as a misspelling (nearAffix): a shorter one
// ('db_', 'x') is as likely the prefix of tools served elsewhere.
const minAffix = 4

// nearAffix returns the part of a name among candidates that the string
// of r, a startsWith (endsWith) that holds for none, misspells: a start
// (end) of a name, of minAffix characters at least as the string is,
// ending (starting) where a word of the name does (at its end, or beside
// one of _ - . /), one edit from the string. It returns "" for a string
// near no such part, for another kind of rule, and for a string shorter
// than minAffix.
func nearAffix(r nameRule, candidates []string) string {
	if (r.kind != "startsWith" && r.kind != "endsWith") || len(r.s) < minAffix {
		return ""
	}
	sep := func(c byte) bool { return strings.IndexByte("_-./", c) >= 0 }
	for _, name := range candidates {
		for k := max(minAffix, len(r.s)-1); k <= min(len(name), len(r.s)+1); k++ {
			part, at := name[:k], k
			if r.kind == "endsWith" {
				part, at = name[len(name)-k:], len(name)-k
			}
			bounded := at == 0 || at == len(name) || sep(name[at-1]) || sep(name[at])
			if bounded && textdist.Distance(r.s, part) <= 1 {
				return part
			}
		}
	}
	return ""
}
