package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// Inert reports layers that can never act on the calls they are given.
var Inert = &Rule{
	Name:     "guard/inert",
	Severity: dsl.Error,
	Warns:    true,
	Doc: `a checking layer that can never act on the calls it is given.

egress checks the argument a tool names with url_arg, and file_check the one
it names with path_arg; a tool without one passes through them unchecked.
An egress or file_check scoped with tools: to such a tool is an error (a
call of it with q: "http://169.254.169.254/" runs), and so is a tool_policy
arg_patterns entry naming an argument that none of the tools it applies to
declares in its args schema (the pattern never matches). An unscoped egress
or file_check when no declared tool has the argument checks nothing: a
warning.`,
	Run: func(p *Pass) {
		for _, e := range p.Policy.Chains["tool"] {
			switch e.Use {
			case "egress":
				p.inertArgCheck(e, "url_arg", func(t *dsl.Tool) string { return t.URLArg })
			case "file_check":
				p.inertArgCheck(e, "path_arg", func(t *dsl.Tool) string { return t.PathArg })
			case "tool_policy":
				p.inertArgPatterns(e)
			}
		}
	},
}

// inertArgCheck reports an egress or file_check entry whose tools declare no
// argument for it to check.
func (p *Pass) inertArgCheck(e *dsl.Entry, field string, arg func(*dsl.Tool) string) {
	if len(e.Tools) > 0 {
		for i, name := range e.Tools {
			t := p.Policy.Tools[name]
			if t == nil || arg(t) != "" {
				continue
			}
			p.Report(dsl.Diagnostic{Pos: e.ToolsPos[i], Severity: dsl.Error,
				Related: []dsl.Related{{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared here, without %s", name, field)}},
				Message: fmt.Sprintf("%s is scoped to `%s`, which declares no %s: its calls pass unchecked; declare %s on the tool, or remove it from tools:", e.Ref(), name, field, field)})
		}
		return
	}
	var rel []dsl.Related
	for _, name := range p.toolNames() {
		t := p.Policy.Tools[name]
		if arg(t) != "" {
			return
		}
		rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` declares no %s", name, field)})
	}
	p.Report(dsl.Diagnostic{Pos: e.UsePos, Severity: dsl.Warning, Related: rel,
		Message: fmt.Sprintf("%s checks nothing: no declared tool has %s, so every call passes it unchecked; declare %s on the tools it should check", e.Ref(), field, field)})
}

// inertArgPatterns reports arg_patterns entries naming an argument that no
// tool the entry applies to declares.
func (p *Pass) inertArgPatterns(e *dsl.Entry) {
	patterns, _ := e.Fields["arg_patterns"].([]any)
	tools := e.Tools
	if len(tools) == 0 {
		tools = p.toolNames()
	}
	if len(tools) == 0 {
		return
	}
	for i, x := range patterns {
		m, _ := x.(map[string]any)
		arg, _ := m["arg"].(string)
		if arg == "" {
			continue
		}
		var rel []dsl.Related
		declared := false
		for _, name := range tools {
			t := p.Policy.Tools[name]
			if t == nil {
				declared = true // reported as a bad reference
				break
			}
			has, known := t.HasArg(arg)
			if has || !known {
				declared = true
				break
			}
			rel = append(rel, dsl.Related{Pos: t.ArgsPos, Message: fmt.Sprintf("the args of `%s` have no %q", name, arg)})
		}
		if declared {
			continue
		}
		p.Report(dsl.Diagnostic{Pos: e.FieldPos(fmt.Sprintf("arg_patterns.%d.arg", i)), Severity: dsl.Error, Related: rel,
			Message: fmt.Sprintf("%s arg_patterns[%d] names argument %q, which no tool it applies to declares: the pattern never matches", e.Ref(), i, arg)})
	}
}
