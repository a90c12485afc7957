package vet

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/argpath"
)

// PathCheckOutsideFileCheck reports a check of a path argument that sits
// outside the file_check confining it.
var PathCheckOutsideFileCheck = &Rule{
	Name:     "order/path-check-outside-file-check",
	Severity: dsl.Error,
	Doc: `a check of a file path argument sits outside file_check, so another spelling of the path it refuses passes it.

file_check resolves each path a tool's path_arg names ("..", ".", a
relative path, symbolic links) and hands the real path to the layers
inside it and to the tool; a layer outside it sees the path as the call
spells it. A tool_policy arg_patterns entry on that argument ("\\.env$",
"^/srv/ws/private/") or a guard reading args.<path_arg> that sits outside
file_check therefore refuses one spelling of a file and lets the others
through: "ws/.env/.", "ws/./private/p.txt", a relative "private/p.txt" or
a link "notes.txt" pointing at .env all reach the tool, which opens the
file the check was meant to keep from it. Move the check inside file_check
(after it in the chain): it then reads the resolved real path, which has
one spelling per file, both for a call run here and for one a gateway
admits for the client that runs it (agentc serve). A when of such a layer reading the path decides
on the same spelling, and is reported as well; a presence test
(has(args.path)) or a read of a list's size (size(args.files)) is not,
and a read behind a name test (tool.name == 'lookup' && args.path...)
counts for the tools it names only. A check inside another file_check that covers the
tool already reads the real path and is not reported.`,
	Run: func(p *Pass) {
		chain := p.Policy.Chains["tool"]
		// The file_checks each tool's calls reach, in chain order, and the
		// top-level names of its path_arg: computed once, not for each
		// check and tool.
		checks := map[string][]*dsl.Entry{}
		names := map[string][]string{}
		for _, f := range chain {
			if f.Use != "file_check" {
				continue
			}
			for _, t := range p.ToolsReaching(f) {
				if _, ok := names[t.Name]; !ok {
					names[t.Name] = pathArgNames(t)
				}
				if len(names[t.Name]) > 0 {
					checks[t.Name] = append(checks[t.Name], f)
				}
			}
		}
		if len(checks) == 0 {
			return
		}
		for _, e := range chain {
			if e.Use != "tool_policy" && e.Use != "guard" {
				continue
			}
			// The tools whose path e reads unresolved, by the top-level
			// name of their path_arg, each with the file_check that
			// resolves it: the first further in, where none is outside e.
			unresolved := map[string][]pathTool{}
			for _, t := range p.ToolsReaching(e) {
				cs := checks[t.Name]
				if len(cs) == 0 || cs[0].Index < e.Index {
					continue
				}
				for _, n := range names[t.Name] {
					unresolved[n] = append(unresolved[n], pathTool{tool: t, check: cs[0]})
				}
			}
			if len(unresolved) == 0 {
				continue
			}
			report := func(pos dsl.Pos, what string, pts []pathTool) {
				pt := pts[0]
				tool := "`" + pt.tool.Name + "`"
				if len(pts) > 1 {
					tool += fmt.Sprintf(" (and %s more)", count(len(pts)-1))
				}
				p.Reportf(pos, []dsl.Related{at(pt.check, "%s is here, inside %s", pt.check.Ref(), e.Ref())},
					"%s reads %s, the path_arg of %s, but it sits outside %s: it sees the path as the call spells it, not the real path %s resolves, so another spelling of a file it refuses (\"dir/./f\", \"f/.\", a relative path, a symbolic link) passes it and reaches the tool; move %s inside %s (after it in the chain), where it reads the resolved path",
					e.Ref(), what, tool, pt.check.Ref(), pt.check.Ref(), e.Ref(), pt.check.Ref())
			}
			readsPath := func(x *dsl.Expr, where string) {
				if x == nil {
					return
				}
				for _, r := range ArgReads(x.Source) {
					// A read of its size alone (size(args.files)) does
					// not read a path; a name test around the read
					// (tool.name == 'lookup' && ...) keeps it off the
					// other tools.
					if r.Sized {
						continue
					}
					var pts []pathTool
					for _, pt := range unresolved[r.Field] {
						if r.Tools == nil || slices.Contains(r.Tools, pt.tool.Name) {
							pts = append(pts, pt)
						}
					}
					if len(pts) > 0 {
						report(x.PosAt(r.Offset), "args."+r.Field+where, pts)
						return
					}
				}
			}
			switch e.Use {
			case "tool_policy":
				patterns, _ := e.Fields["arg_patterns"].([]any)
				for i, x := range patterns {
					m, _ := x.(map[string]any)
					arg, _ := m["arg"].(string)
					// The layer tries a pattern on an argument of its name
					// in any case.
					for _, n := range slices.Sorted(maps.Keys(unresolved)) {
						if strings.EqualFold(n, arg) {
							report(e.FieldPos(fmt.Sprintf("arg_patterns.%d.arg", i)), fmt.Sprintf("argument %q in arg_patterns[%d]", arg, i), unresolved[n])
							break
						}
					}
				}
			case "guard":
				for _, f := range []string{"deny", "require"} {
					readsPath(e.Expr(f), "")
				}
			}
			// A when deciding whether the check applies reads the same
			// spelling.
			readsPath(e.When, " in its when")
		}
	},
}

// A pathTool is a tool whose path argument a check reads unresolved, with
// the file_check that resolves it further in.
type pathTool struct {
	tool  *dsl.Tool
	check *dsl.Entry
}

// pathArgNames returns the top-level argument names t's path_arg references
// go through: "path" for "path", "files" for "/files/*/path".
func pathArgNames(t *dsl.Tool) []string {
	var out []string
	for _, ref := range t.PathArgs {
		p, err := argpath.Parse(ref)
		if err != nil || len(p.Tokens()) == 0 {
			continue
		}
		if n := p.Tokens()[0]; !contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
