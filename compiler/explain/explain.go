package explain

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime"
)

// Explanation is what agentc explain shows about a policy.
type Explanation struct {
	// Policy is the policy's package name.
	Policy string
	// Stages holds the stages that have a chain, in the order chat, tool,
	// turn.
	Stages []*Stage
}

// Stage is one chain.
type Stage struct {
	// Name is "chat", "tool" or "turn".
	Name string
	// Callee is what the innermost layer calls: "model call", "tool call" or
	// "agent turn".
	Callee string
	// Layers are the chain's entries, outermost first.
	Layers []*Layer
	// Consequences spell out what the order means for a call.
	Consequences []string
}

// Layer is one entry of a chain.
type Layer struct {
	// Index is the entry's 0-based index in its chain.
	Index int
	// Ref names the entry: "name (use)" or "use".
	Ref string
	Use string
	// Traits are the kind's traits in words ("re-invokes", "guards").
	Traits []string
	// Settings are the entry's key settings ("max_attempts 3").
	Settings []string
	// Scope holds its tools: and when, if any ("tools: refund"), and
	// says when it checks nothing (a file_check no tool's path_arg feeds).
	Scope []string
	// State says where the layer keeps its state, one line per store it
	// uses ("rate limit in store \"shared\" (redis, url_env REDIS_URL):
	// shared by every replica"); empty for a layer without state.
	State []string
	// Pos is file:line of the entry, the file relative to the policy
	// directory.
	Pos string
	// Held lists what holds the layer in place.
	Held []*Hold
}

// Hold is one ordering constraint as seen from one of its layers.
type Hold struct {
	// Rule is the rule id a violation reports (order/<constraint id>).
	Rule string
	// Outside is true when the layer must sit outside Other, false when
	// inside.
	Outside bool
	// Other is the Ref of the other layer, or a description of the layers
	// ("every other layer").
	Other string
	// Why is the constraint's reason.
	Why string
	// Violated is true when the chain breaks the constraint.
	Violated bool
}

// traitWords are the traits as explain writes them.
var traitWords = map[string]string{
	"reinvokes":             "re-invokes",
	"short_circuits":        "short-circuits",
	"records":               "records",
	"counts_tokens":         "counts tokens",
	"rewrites_messages":     "rewrites messages",
	"guards":                "guards",
	"caches":                "caches",
	"side_effect_sensitive": "side-effect sensitive",
}

// keySettings are the config fields shown for each builtin, in order.
var keySettings = map[string][]string{
	"retry":            {"max_attempts", "attempt_timeout", "idle_timeout", "breaker"},
	"fallback":         {"models"},
	"hedge":            {"models", "delay", "win"},
	"audit":            {"trail", "sink", "include_args", "include_errors"},
	"log":              {"include_args", "include_errors"},
	"meter":            {"budget", "scope", "window", "on_cross"},
	"rate_limit":       {"rate", "per", "burst", "mode", "scope"},
	"compaction":       {"strategy", "max_tokens", "keep_recent"},
	"guard":            {"deny", "require", "phase", "on_error"},
	"memoize":          {"scope", "ttl", "single_flight"},
	"semantic_memoize": {"scope", "threshold"},
	"idempotent":       {"ttl", "key_args"},
	"egress":           {"allow", "allow_private", "scan_args"},
	"tool_policy":      {"allow", "deny", "arg_patterns"},
	"judge":            {"model", "on_error"},
	"output_coerce":    {"mode"},
	"pii":              {"action", "kinds", "system", "on_error"},
	"content_filter":   {"keywords", "patterns", "system", "on_error"},
	"security":         {"patterns", "defaults", "threshold", "system", "on_error"},
	"max_tokens":       {"limit"},
	"file_check":       {"roots"},
	"truncate":         {"max_chars"},
	"checkpoint":       {"after_tool", "keep"},
}

// chatSettings are the key settings shown in the chat stage only: system
// decides whether the system messages of the transcript are read, and the
// other stages have no transcript.
var chatSettings = map[string]bool{"system": true}

// whenOnSettings are the key settings shown only when true: audit's and
// log's, which write arguments and error text in clear into a trail or a
// log (off by default, and off says nothing a reviewer needs).
var whenOnSettings = map[string]bool{"include_args": true, "include_errors": true}

// unsetSettings are the key settings shown when the policy leaves them
// unset, and what the builtin then does.
var unsetSettings = map[string]map[string]string{
	"pii": {"kinds": "all"},
}

// settingFormats render the key settings format would not write readably:
// regular expressions, each between backquotes (a space at its end shows),
// and tool_policy's argument patterns, each an argument and its expression.
var settingFormats = map[string]func(any) string{
	"patterns": func(v any) string { return formatList(v, func(x any) string { return regex(fmt.Sprint(x)) }) },
	"arg_patterns": func(v any) string {
		return formatList(v, func(x any) string {
			m, _ := x.(map[string]any)
			return fmt.Sprint(m["arg"]) + " " + regex(fmt.Sprint(m["pattern"]))
		})
	},
}

var callees = map[string]string{"chat": "model call", "tool": "tool call", "turn": "agent turn"}

// Build explains p, with the builtins' constraints.
func Build(p *dsl.Policy, builtin []*dsl.Constraint) *Explanation {
	a := vet.Analyze(p, builtin)
	x := &Explanation{Policy: p.Package}
	for _, stage := range dsl.Stages {
		chain := p.Chains[stage]
		if len(chain) == 0 {
			continue
		}
		st := &Stage{Name: stage, Callee: callees[stage]}
		for _, e := range chain {
			st.Layers = append(st.Layers, layer(a, p, e))
		}
		st.Consequences = consequences(a, stage, chain)
		x.Stages = append(x.Stages, st)
	}
	return x
}

func layer(a *vet.Analysis, p *dsl.Policy, e *dsl.Entry) *Layer {
	l := &Layer{Index: e.Index, Ref: e.Ref(), Use: e.Use, Pos: relPos(p, e.Pos)}
	if e.Kind != nil {
		for _, t := range e.Kind.Traits {
			if w, ok := traitWords[t]; ok {
				l.Traits = append(l.Traits, w)
			} else {
				l.Traits = append(l.Traits, t)
			}
		}
	}
	for _, f := range keySettings[e.Use] {
		v, ok := e.Fields[f]
		switch {
		case chatSettings[f] && e.Stage != "chat":
		case whenOnSettings[f] && v != true:
		case ok && (f != "on_cross" || crossable(e)):
			text := format(v)
			if render := settingFormats[f]; render != nil {
				text = render(v)
			}
			l.Settings = append(l.Settings, f+": "+text)
		case !ok && unsetSettings[e.Use][f] != "":
			l.Settings = append(l.Settings, f+": "+unsetSettings[e.Use][f])
		}
	}
	if len(e.Tools) > 0 {
		l.Scope = append(l.Scope, "tools: "+strings.Join(e.Tools, ", "))
	}
	if e.When != nil {
		l.Scope = append(l.Scope, "when: "+e.When.Source)
	}
	if s := checksNothing(p, e); s != "" {
		l.Scope = append(l.Scope, s)
	}
	for _, u := range vet.StateOf(p, e) {
		l.State = append(l.State, stateLine(u))
	}
	if e.Use == "tracing" {
		l.Held = append(l.Held, &Hold{Rule: "order/tracing-outermost", Outside: true, Other: "every other layer",
			Why: "the span covers only the layers inside it", Violated: e.Index != 0})
	}
	seen := map[string]bool{}
	for _, pr := range a.PairsOf(e) {
		h := &Hold{Rule: "order/" + pr.Constraint.ID, Why: pr.Constraint.Why, Violated: !pr.Holds}
		if pr.Outer == e {
			h.Outside, h.Other = true, pr.Inner.Ref()
		} else {
			h.Other = pr.Outer.Ref()
		}
		key := fmt.Sprint(h.Rule, h.Outside, h.Other)
		if seen[key] {
			continue
		}
		seen[key] = true
		l.Held = append(l.Held, h)
	}
	return l
}

// crossable reports whether a meter has a tokens or usd ceiling, which
// on_cross decides the crossing of (a calls ceiling is never crossed).
func crossable(e *dsl.Entry) bool {
	budget, _ := e.Fields["budget"].(map[string]any)
	_, tokens := budget["tokens"]
	_, usd := budget["usd"]
	return tokens || usd
}

// stateLine says where one part of a layer's state lives: the store, its
// kind and address (never a URL's credentials), and who shares it.
func stateLine(u vet.StateUse) string {
	if u.Decl == nil {
		if u.Store == "" {
			return "state: " + u.What + " in process memory: each replica has its own"
		}
		return fmt.Sprintf("state: %s in the %s store, process memory: each replica has its own", u.What, u.Store)
	}
	var where []string
	switch u.Kind {
	case "memory":
		where = append(where, "process memory")
	case "sqlite":
		where = append(where, "sqlite file "+u.Decl.Path)
	default:
		where = append(where, u.Kind)
		if u.Decl.URLEnv != "" {
			where = append(where, "url_env "+u.Decl.URLEnv)
		} else if u.Decl.URL != "" {
			where = append(where, "url "+runtime.RedactURL(u.Decl.URL))
		}
		if u.Decl.Prefix != "" {
			where = append(where, "prefix "+u.Decl.Prefix)
		}
	}
	who := "each replica has its own"
	switch {
	case u.Shared():
		who = "shared by every replica"
	case u.Kind == "sqlite":
		who = "shared by the processes on this host, each host has its own"
	case u.Kind != "memory":
		who = "a kind the host registers: who shares it depends on that kind"
	}
	return fmt.Sprintf("state: %s in store %q (%s): %s", u.What, u.Store, strings.Join(where, ", "), who)
}

// relPos formats pos as file:line with the file relative to the policy
// directory.
func relPos(p *dsl.Policy, pos dsl.Pos) string {
	if !pos.IsValid() {
		return ""
	}
	file := pos.File
	if p.Dir != "" {
		if r, err := filepath.Rel(p.Dir, file); err == nil && !strings.HasPrefix(r, "..") {
			file = r
		}
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(file), pos.Line)
}

// formatList renders a list with item, its items joined by ", ".
func formatList(v any, item func(any) string) string {
	list, ok := v.([]any)
	if !ok {
		return format(v)
	}
	parts := make([]string, len(list))
	for i, x := range list {
		parts[i] = item(x)
	}
	return strings.Join(parts, ", ")
}

// regex writes a regular expression between backquotes, quoted as a Go
// string when it holds a backquote or a control character.
func regex(re string) string {
	if strconv.CanBackquote(re) {
		return "`" + re + "`"
	}
	return strconv.Quote(re)
}

// format renders a config value compactly: lists as "a, b", structs as
// "k v, k v" in key order.
func format(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = format(x)
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + format(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case float64:
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprint(v)
}
