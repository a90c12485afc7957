package vet

import (
	"fmt"
	"sort"

	"github.com/agentc-dev/agentc/dsl"
)

// Tool reach: which tool calls a tool-chain entry can see.
//
// An entry applies to a call of tool t unless its tools: list leaves t out
// or its `when` is false for every call of t (evaluated statically with
// `tool` bound to t's declaration and the call's arguments and run
// unknown). A tool reaches an entry when the entry applies to it and no
// entry of the chain refuses t outright: a tool_policy whose allow list
// leaves t out or whose deny list names it, or a "before" guard whose
// deny is true (or require false) for every call of t, either with a when
// that holds for every call of t. Anything the
// analysis cannot decide statically counts as reaching: the rules warn
// about what can happen.

// Applies reports whether e can see calls of the named tool. "" stands for a
// tool the policy does not declare. Entries of the chat and turn chains see
// every call of their stage.
func (a *Analysis) Applies(e *dsl.Entry, tool string) bool {
	if e.Stage != "tool" {
		return true
	}
	k := appliesKey{e, tool}
	if v, ok := a.applies[k]; ok {
		return v
	}
	v := a.applies1(e, tool)
	a.applies[k] = v
	return v
}

func (a *Analysis) applies1(e *dsl.Entry, tool string) bool {
	if len(e.Tools) > 0 && !contains(e.Tools, tool) {
		return false
	}
	if e.When != nil {
		if v, known := a.predicate(e.When.Source).eval(a.Policy.Tools[tool]); known && !v {
			return false
		}
	}
	return true
}

// Blocker returns the entry of the tool chain that refuses every call of
// the named tool before it runs, or nil.
func (a *Analysis) Blocker(tool string) *dsl.Entry {
	if b, ok := a.blockers[tool]; ok {
		return b
	}
	b := a.blocker(tool)
	a.blockers[tool] = b
	return b
}

func (a *Analysis) blocker(tool string) *dsl.Entry {
	t := a.Policy.Tools[tool]
	for _, e := range a.Policy.Chains["tool"] {
		if !a.Applies(e, tool) {
			continue
		}
		if e.When != nil {
			// A when that depends on the call or the run lets the
			// other calls of the tool through.
			if v, known := a.predicate(e.When.Source).eval(t); !known || !v {
				continue
			}
		}
		switch e.Use {
		case "tool_policy":
			// allow: [] refuses every tool.
			if allow, ok := e.Fields["allow"]; ok && !contains(stringList(allow), tool) {
				return e
			}
			if contains(stringList(e.Fields["deny"]), tool) {
				return e
			}
		case "guard":
			if phase, _ := e.Fields["phase"].(string); phase == "after" || t == nil {
				continue
			}
			if src, ok := e.Fields["deny"].(string); ok {
				if v, known := a.predicate(src).eval(t); known && v {
					return e
				}
			}
			if src, ok := e.Fields["require"].(string); ok {
				if v, known := a.predicate(src).eval(t); known && !v {
					return e
				}
			}
		}
	}
	return nil
}

// Reaches reports whether calls of the named tool can reach e: e applies to
// them and no layer refuses them outright.
func (a *Analysis) Reaches(e *dsl.Entry, tool string) bool {
	return a.Applies(e, tool) && (e.Stage != "tool" || a.Blocker(tool) == nil)
}

// ToolsReaching returns the declared tools whose calls can reach e, sorted
// by name. It is empty for entries outside the tool chain.
func (a *Analysis) ToolsReaching(e *dsl.Entry) []*dsl.Tool {
	if e.Stage != "tool" {
		return nil
	}
	var out []*dsl.Tool
	for _, name := range a.toolNames() {
		if a.Reaches(e, name) {
			out = append(out, a.Policy.Tools[name])
		}
	}
	return out
}

// sideEffectingReaching returns the side-effecting tools among
// ToolsReaching(e), with a related position at each one's declaration.
func (a *Analysis) sideEffectingReaching(e *dsl.Entry) ([]*dsl.Tool, []dsl.Related) {
	var bad []*dsl.Tool
	var rel []dsl.Related
	for _, t := range a.ToolsReaching(e) {
		if t.SideEffecting {
			bad = append(bad, t)
			rel = append(rel, dsl.Related{Pos: t.Pos, Message: fmt.Sprintf("`%s` is declared side_effecting here", t.Name)})
		}
	}
	return bad, rel
}

// Overlap reports whether x and y can see the same call: always in the turn
// chain; in the chat chain unless their `when`s keep them apart (ChatMeet);
// in the tool chain when some tool has calls both apply to: a declared
// one, or, when undeclared tools can run (settings.allow_undeclared_tools,
// an mcp server's tools, or a policy that declares none), any other.
func (a *Analysis) Overlap(x, y *dsl.Entry) bool {
	a.overlaps++
	if x.Stage == "chat" && y.Stage == "chat" {
		return a.ChatMeet(x, y) != Never
	}
	if x.Stage != "tool" || y.Stage != "tool" {
		return x.Stage == y.Stage
	}
	candidates := a.toolNames()
	if a.UndeclaredToolsRun() {
		candidates = append(candidates, "")
		candidates = append(candidates, x.Tools...)
		candidates = append(candidates, y.Tools...)
	}
	for _, t := range candidates {
		if a.Applies(x, t) && a.Applies(y, t) {
			return true
		}
	}
	return false
}

// UndeclaredToolsRun reports whether calls of tools the policy does not
// declare can reach its tool chain: with settings.allow_undeclared_tools,
// with an mcp server (whose tools agentc serve lets through), or when the
// policy declares no tools at all, and nothing is known of them. Otherwise
// the runtime refuses such a call on entry to the chain.
func (a *Analysis) UndeclaredToolsRun() bool {
	p := a.Policy
	return p.AllowUndeclaredTools || len(p.MCPServers) > 0 || len(p.Tools) == 0
}

// SharedTools returns the declared tools whose calls can reach both x and
// y, sorted by name.
func (a *Analysis) SharedTools(x, y *dsl.Entry) []*dsl.Tool {
	var out []*dsl.Tool
	for _, t := range a.ToolsReaching(x) {
		if a.Reaches(y, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func (a *Analysis) toolNames() []string {
	names := make([]string, 0, len(a.Policy.Tools))
	for n := range a.Policy.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// predicate returns the compiled static form of a tool-stage predicate.
func (a *Analysis) predicate(src string) *staticPredicate {
	if p, ok := a.static[src]; ok {
		return p
	}
	p := compileStatic(src)
	a.static[src] = p
	return p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// stringList returns a config list of strings, or nil when absent.
func stringList(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
