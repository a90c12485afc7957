package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ruleUncheckedKey is the warning for a predicate that reads a key of an
// optional map (item.metadata, run.meta, session.meta, a request's
// metadata) without testing it first.
const ruleUncheckedKey = "cel/unchecked-key"

// optionalMaps are the map-typed inputs of the predicates whose keys are
// whatever the host, the caller or the retriever put there: none is ever
// known to be present.
var optionalMaps = []string{"item.metadata", "run.meta", "session.meta", "request.params.metadata"}

// keyFailure says what a predicate's evaluation error does at run time, for
// a predicate of the given kind ("when", "guard", "state" or "" for admit)
// and field, onError being a guard's on_error.
func keyFailure(kind, field, onError string) string {
	switch {
	case field == "admit":
		return "admit fails closed: the item is dropped"
	case kind == "when":
		return "the when fails, which applies the layer: it runs for that call whatever the condition says"
	case kind == "guard" && onError == "open":
		return `the guard fails open (on_error "open"): the call passes unchecked`
	case kind == "guard":
		return `the guard fails closed (on_error "closed"): the call is blocked`
	case kind == "state" && field == "set":
		return "the set handler fails: the value is refused"
	case kind == "state":
		return "the handler fails closed: the value is refused"
	}
	return "the predicate fails"
}

// checkOptionalKeys warns about each read of a key of an optional map
// (item.metadata.KEY, run.meta.KEY, ...) that no presence test guards:
// where the key is absent the read fails, and the predicate fails as
// failure says, unless the rest of it decides it (the other side of an ||
// that is true, of an && that is false). In a tool-stage predicate whose
// args are typed (its entry scoped to tools), so is a map below args (an
// object whose keys are free, args.headers['X-Debug']) or a value the
// schema leaves untyped, unless every scoped tool's schema requires the
// key.
func (c *Compilation) checkOptionalKeys(x *dsl.Expr, checked *predicate.Checked, stage predicate.Stage, tools []string, failure string) {
	argMaps := stage == predicate.Tool && c.argsSchemas(tools) != nil
	optional := func(r predicate.KeyRead) bool {
		if slices.Contains(optionalMaps, r.Map) {
			return true
		}
		arg, ok := strings.CutPrefix(r.Map, "args.")
		return ok && argMaps && !c.argKeyRequired(tools, arg, r.Key)
	}
	var seen []string
	for _, r := range checked.KeyReads {
		if r.Tested || slices.Contains(seen, r.Map+"."+r.Key) || !optional(r) {
			continue
		}
		seen = append(seen, r.Map+"."+r.Key)
		test := fmt.Sprintf("!has(%s.%s)", r.Map, r.Key)
		read := fmt.Sprintf("%s.?%s.orValue(...)", r.Map, r.Key)
		if !isIdent(r.Key) {
			test = fmt.Sprintf("!('%s' in %s)", r.Key, r.Map)
			read = fmt.Sprintf("%s[?'%s'].orValue(...)", r.Map, r.Key)
		}
		c.report(dsl.Warnf(x.PosAt(r.Offset), ruleUncheckedKey,
			"where %s has no key %q, reading it fails, and %s, unless the rest of the predicate decides it; test it first (%s || ...) or read %s",
			r.Map, r.Key, failure, test, read))
	}
}

// argKeyRequired reports whether the args schema of each of tools lists key
// among the required keys of the object at path ("headers",
// "shipping.extra"); false for a path through a list.
func (c *Compilation) argKeyRequired(tools []string, path, key string) bool {
	if strings.ContainsAny(path, "[]") {
		return false
	}
	for _, name := range tools {
		sub, ok := subSchema(c.Policy.Tools[name].Args, strings.Split(path, "."))
		var s struct {
			Required []string `json:"required"`
		}
		if !ok || json.Unmarshal(sub, &s) != nil || !slices.Contains(s.Required, key) {
			return false
		}
	}
	return len(tools) > 0
}

// isIdent reports whether s is a CEL identifier, so that m.s selects it.
func isIdent(s string) bool {
	for i, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// checkUndeclaredArgs reports, for a tool-stage predicate of an entry not
// scoped to tools (args untyped), each argument it reads, untested, that no
// declared tool's schema has, at the top (args.x) or inside an object
// argument (args.shipping.x). Such a read fails on every call that reaches
// it (a guard then blocks the call): it is a typo. A read that a presence
// test guards (has(args.x) && args.x ...) cannot fail and is left alone,
// but the test itself, has(args.x) of an argument no schema has, is always
// false, and reported. Nothing is said when a tool may send arguments no
// schema lists: a declared tool whose schema (or the object's) is not
// closed (no properties, additionalProperties not false,
// patternProperties, a composition), undeclared tools allowed, or MCP
// servers' tools. It reports whether it found one.
func (c *Compilation) checkUndeclaredArgs(x *dsl.Expr, checked *predicate.Checked, failure string) bool {
	p := c.Policy
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
		return false
	}
	var found []string
	for _, r := range checked.KeyReads {
		object, ok := strings.CutPrefix(r.Map, "args")
		if !ok || object != "" && object[0] != '.' || r.Tested && !r.Test || slices.Contains(found, r.Map+"."+r.Key) {
			continue
		}
		declared, ok := c.closedArgNames(strings.Split(strings.TrimPrefix(object, "."), "."))
		if !ok {
			if c.checkFieldOfScalar(x, r, failure) {
				found = append(found, r.Map+"."+r.Key)
			}
			continue
		}
		if slices.Contains(declared, r.Key) {
			continue
		}
		found = append(found, r.Map+"."+r.Key)
		schema := "args schema"
		if object != "" {
			schema = "schema of " + r.Map
		}
		msg := fmt.Sprintf("undefined field '%s': no declared tool's %s has it (tools: %s)", r.Key, schema, nameList(sortedNames(p.Tools)))
		if r.Test {
			msg = fmt.Sprintf("has(%s.%s) is always false: no declared tool's %s has %s (tools: %s)", r.Map, r.Key, schema, r.Key, nameList(sortedNames(p.Tools)))
		}
		if best := textdist.Closest(r.Key, declared); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		c.report(dsl.Errorf(x.PosAt(r.Offset), predicate.RuleType, "%s", msg))
	}
	return len(found) > 0
}

// checkFieldOfScalar reports a read of a field of an argument that every
// declared tool listing it types as no object (args.amount.x, amount a
// number): the read fails on each call with the argument, and failure
// says what follows; has() of it is always false for a number, a string or
// a boolean, and an evaluation error for a list. It reports whether it
// found one.
func (c *Compilation) checkFieldOfScalar(x *dsl.Expr, r predicate.KeyRead, failure string) bool {
	object, ok := strings.CutPrefix(r.Map, "args.")
	if !ok {
		return false
	}
	a, ok := c.argTypesAt(object, nil)
	if !ok || slices.Contains(a.types, "object") {
		return false
	}
	verb := "types"
	if len(a.declaring) > 1 {
		verb = "type"
	}
	outcome := fmt.Sprintf("reading %s.%s fails on each call with %s, and %s", r.Map, r.Key, r.Map, failure)
	switch {
	case r.Test && slices.Contains(a.types, "array"):
		outcome = fmt.Sprintf("has(%s.%s) is an evaluation error on each call with %s, and %s", r.Map, r.Key, r.Map, failure)
	case r.Test:
		outcome = fmt.Sprintf("has(%s.%s) is always false", r.Map, r.Key)
	}
	c.report(dsl.Errorf(x.PosAt(r.Offset), predicate.RuleType, "%s has no field '%s': %s %s it as %s, and a call's arguments are checked against its tool's schema, so %s",
		r.Map, r.Key, strings.Join(a.declaring, ", "), verb, strings.Join(a.types, " or "), outcome))
	return true
}

// closedArgNames returns the names the declared tools' args schemas give
// the object at path (none: the arguments themselves), when every tool
// whose schema has that object lists all its fields (see
// dsl.Tool.ClosedArgNames); false when one does not, a tool declares no
// schema, or none has the object.
func (c *Compilation) closedArgNames(path []string) ([]string, bool) {
	if len(path) == 1 && path[0] == "" {
		path = nil
	}
	var names []string
	has := false
	for _, name := range sortedNames(c.Policy.Tools) {
		args := c.Policy.Tools[name].Args
		if len(args) == 0 {
			return nil, false
		}
		sub, ok := subSchema(args, path)
		if !ok {
			continue
		}
		props, ok := (&dsl.Tool{Args: sub}).ClosedArgNames()
		if !ok {
			return nil, false
		}
		has = true
		for _, prop := range props {
			if !slices.Contains(names, prop) {
				names = append(names, prop)
			}
		}
	}
	return names, has
}

// maxListed is the most names a message lists.
const maxListed = 5

// nameList joins names with commas, the first few only: "a, b, c, d, e
// and 7 more".
func nameList(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// checkUnscopedArgKeys warns, for a tool-stage predicate of an entry not
// scoped to tools (args untyped), about each argument it reads untested
// that a declared tool's args schema does not require: on that tool's calls the argument
// may be absent, the read fails, and the predicate fails as failure says
// (an unscoped deny: "args.amount > 100.0" blocks every call of a search
// tool, with a "no such key" error). A predicate that reads tool.name is
// left alone: it may decide before the read (tool.name == 'refund' && ...),
// and so is a tool the entry's when leaves out whatever the call
// (tool.url_arg != "" for a tool without one): the runtime evaluates
// the when first.
func (c *Compilation) checkUnscopedArgKeys(x *dsl.Expr, checked *predicate.Checked, failure string, when *dsl.Expr) {
	p := c.Policy
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 || slices.Contains(checked.Reads, "tool") {
		return
	}
	excluded := func(*dsl.Tool) bool { return false }
	if when != nil {
		excluded = vet.WhenExcludes(when.Source)
	}
	var seen []string
	for _, r := range checked.KeyReads {
		if r.Map != "args" || r.Tested || slices.Contains(seen, r.Key) {
			continue
		}
		seen = append(seen, r.Key)
		var lacking []string
		for _, name := range sortedNames(p.Tools) {
			if t := p.Tools[name]; len(t.Args) > 0 && !slices.Contains(t.RequiredArgNames(), r.Key) && !excluded(t) {
				lacking = append(lacking, name)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		do, their := "does", "its"
		if len(lacking) > 1 {
			do, their = "do", "their"
		}
		c.report(dsl.Warnf(x.PosAt(r.Offset), ruleUncheckedKey,
			"the entry is not scoped to tools, and %s %s not require %q: on %s calls without it, reading args.%s fails, and %s, unless the rest of the predicate decides it; scope the entry with tools:, or test it first (has(args.%s) && ...)%s",
			"`"+strings.Join(lacking, "`, `")+"`", do, r.Key, their, r.Key, failure, r.Key, argTypo(p, r.Key)))
	}
}

// argTypo names the argument a read of key may have meant, when no
// declared tool's args schema lists key and one lists a close name (a
// misspelt amount); "" otherwise.
func argTypo(p *dsl.Policy, key string) string {
	var names []string
	for _, name := range sortedNames(p.Tools) {
		args, _ := p.Tools[name].ArgNames()
		if slices.Contains(args, key) {
			return ""
		}
		names = append(names, args...)
	}
	if best := textdist.Closest(key, names); best != "" {
		return fmt.Sprintf("; no declared tool's args has %q: did you mean %q?", key, best)
	}
	return ""
}
