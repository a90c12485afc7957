package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ruleUnknownValue reports a comparison of a field with a string constant
// the field never holds: an error where the values are closed (the tools a
// tool-stage predicate can see), a warning where a host could bring others.
const ruleUnknownValue = "cel/unknown-value"

// finishReasons are the values of response.finish_reason.
var finishReasons = []string{"", "content_filter", "length", "pause_turn", "stop", "tool_calls"}

// responseFormats are the values of request.params.response_format: the
// format's type, "" when the request sets none.
var responseFormats = []string{"", "json_object", "json_schema", "text"}

// roles are the values of a message's role.
var roles = []string{"assistant", "system", "tool", "user"}

// turnStatuses are the values of status in an after-phase turn guard: a
// turn that ended blocked, over budget or in doubt is returned as it
// ended, without running the guard.
var turnStatuses = []string{"failed", "ok"}

// valueSet is what a field of known values may hold.
type valueSet struct {
	values []string
	what   string // "the declared tools"
	why    string // a note after the values, or ""
	sev    dsl.Severity
}

// knownValues returns the values the field at path may hold in a predicate
// of stage in an entry scoped to tools, or false when they are not known.
func (c *Compilation) knownValues(path string, stage predicate.Stage, tools []string) (valueSet, bool) {
	p := c.Policy
	switch path {
	case "tool.name":
		switch {
		case stage != predicate.Tool:
		case len(tools) > 0:
			return valueSet{values: slices.Sorted(slices.Values(tools)), what: "the tools the entry is scoped to", sev: dsl.Error}, true
		case len(p.Tools) > 0 && !p.AllowUndeclaredTools && len(p.MCPServers) == 0:
			return valueSet{values: sortedNames(p.Tools), what: "the declared tools", why: "; a call of another is refused", sev: dsl.Error}, true
		}
	case "request.model", "response.model":
		if stage == predicate.Chat && len(p.Models) > 0 {
			// A host may register a model client the policy does not
			// declare (runtime.Deps.Models): a warning.
			return valueSet{values: sortedNames(p.Models), what: "the declared models", sev: dsl.Warning}, true
		}
	case "response.finish_reason":
		if stage == predicate.Chat {
			// A provider passes a finish reason it does not map through as
			// it is, and a host's model client may send any: a warning.
			return valueSet{values: finishReasons, what: "the finish reasons", sev: dsl.Warning}, true
		}
	case "request.params.response_format":
		if stage == predicate.Chat {
			// A host's request may carry another type: a warning.
			return valueSet{values: responseFormats, what: "the response format types", sev: dsl.Warning}, true
		}
	case "status":
		if stage == predicate.Turn {
			return valueSet{values: turnStatuses, what: "the statuses a turn guard sees",
				why: "; a turn that ended blocked, over budget or in doubt is returned as it ended, without running the guard", sev: dsl.Error}, true
		}
	case "target.name":
		if stage == invariantStage {
			// prove calls each declared model and tool.
			names := slices.Sorted(slices.Values(append(sortedNames(p.Models), sortedNames(p.Tools)...)))
			return valueSet{values: names, what: "the declared models and tools", why: "; prove calls no other", sev: dsl.Error}, true
		}
	case "target.stage":
		if stage == invariantStage {
			return valueSet{values: []string{"chat", "tool"}, what: "the stages prove calls", sev: dsl.Error}, true
		}
	case "audit[].tool":
		if stage == invariantStage {
			return valueSet{values: sortedNames(p.Tools), what: "the declared tools", why: "; prove calls no other", sev: dsl.Error}, true
		}
	case "messages[].role", "request.messages[].role":
		if stage == predicate.Chat {
			// A host may build messages of other roles: a warning.
			return valueSet{values: roles, what: "the roles", sev: dsl.Warning}, true
		}
	}
	return valueSet{}, false
}

// checkLiterals reports each comparison of a field whose values are known
// (tool.name, a model, response.finish_reason, a message's role) with a
// string constant that is not one of them: tool.name == 'refnd' is always
// false, and a guard that denies with it never fires. tools is the entry's
// scope: a tool-stage entry scoped to tools sees those only. A constant of
// an in list that also holds a value the field may take is a warning: it
// is dead, the test is not.
func (c *Compilation) checkLiterals(x *dsl.Expr, stage predicate.Stage, tools []string, literals []predicate.Literal) {
	live := map[int]bool{} // in lists with a constant the field may hold
	for _, l := range literals {
		if set, ok := c.knownValues(l.Path, stage, tools); ok && l.List > 0 && slices.Contains(set.values, l.Value) {
			live[l.List] = true
		}
	}
	for _, l := range literals {
		set, ok := c.knownValues(l.Path, stage, tools)
		if !ok || slices.Contains(set.values, l.Value) {
			continue
		}
		quoted := make([]string, len(set.values))
		for i, k := range set.values {
			quoted[i] = "'" + k + "'"
		}
		sev := set.sev
		var outcome string
		switch {
		case l.Op == "!=":
			outcome = fmt.Sprintf("%s != '%s' is always true", l.Path, l.Value)
		case l.Op == "in" && live[l.List]:
			outcome, sev = fmt.Sprintf("'%s' in the list never matches (its other values may)", l.Value), dsl.Warning
		case l.Op == "in":
			outcome = "the in test is always false"
		default:
			outcome = fmt.Sprintf("%s == '%s' is always false", l.Path, l.Value)
		}
		msg := fmt.Sprintf("%s is never '%s': it is one of %s (%s%s), so %s",
			l.Path, l.Value, set.what, nameList(quoted), set.why, outcome)
		if stage == invariantStage {
			msg = "invariant: " + msg
		}
		if best := textdist.Closest(l.Value, set.values); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		c.report(dsl.Diagnostic{Pos: x.PosAt(l.Offset), Severity: sev, Rule: ruleUnknownValue, Message: msg})
	}
}

// checkUnscopedArgLiterals reports each comparison of an argument with a
// string constant, in a predicate not scoped to tools (args is untyped),
// where every declared tool whose schema lists the argument types it as
// something else: a call's arguments are checked against its tool's schema
// before any layer, so args.amount is a number whenever it is there, and
// args.amount == '100' is always false (a deny with it never fires). Tools
// that do not list it are not counted; nothing is said where a tool may be
// called that the policy does not declare.
func (c *Compilation) checkUnscopedArgLiterals(x *dsl.Expr, literals []predicate.Literal) {
	p := c.Policy
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
		return
	}
	var reported []int // in lists
	for _, l := range literals {
		path, ok := strings.CutPrefix(l.Path, "args.")
		if !ok || strings.ContainsAny(path, "[]") {
			continue
		}
		var types, declaring []string
		for _, name := range sortedNames(p.Tools) {
			t, found := argType(p.Tools[name].Args, strings.Split(path, "."))
			if !found {
				continue
			}
			if t == "" || t == "string" {
				types = nil // untyped there, or a string
				break
			}
			declaring = append(declaring, "`"+name+"`")
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		if len(types) == 0 {
			continue
		}
		if l.List > 0 && slices.Contains(reported, l.List) {
			continue // one diagnostic per in list
		}
		outcome := fmt.Sprintf("%s == '%s' is always false", l.Path, l.Value)
		switch l.Op {
		case "!=":
			outcome = fmt.Sprintf("%s != '%s' is always true", l.Path, l.Value)
		case "in":
			outcome = "the in test is always false"
			reported = append(reported, l.List)
		}
		verb := "types"
		if len(declaring) > 1 {
			verb = "type"
		}
		c.report(dsl.Errorf(x.PosAt(l.Offset), predicate.RuleType,
			"%s is never a string: %s %s it as %s, and a call's arguments are checked against its tool's schema, so %s; compare it with %s (the entry is not scoped to tools, so args is not typed: scope it with tools: to have every read checked)",
			l.Path, strings.Join(declaring, ", "), verb, strings.Join(types, " or "), outcome, jsonKindPhrase(types)))
	}
}

// jsonKindPhrase names a value of the JSON Schema types, for a message:
// "a number (100.0)".
func jsonKindPhrase(types []string) string {
	if len(types) > 1 && !slices.ContainsFunc(types, func(t string) bool { return t != "number" && t != "integer" }) {
		types = []string{"number"}
	}
	switch types[0] {
	case "number":
		return "a number (100.0)"
	case "integer":
		return "an integer (100)"
	case "boolean":
		return "a boolean (true)"
	case "object":
		return "an object, or compare one of its fields"
	case "array":
		return "a list, or test an element"
	}
	return "a value of its type"
}

// argType returns the JSON Schema type an args schema gives the argument
// at path ("" when it gives none or several, or a list of types that holds
// "string"), and whether the schema lists the argument.
func argType(schema json.RawMessage, path []string) (string, bool) {
	for _, name := range path {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(schema, &s) != nil {
			return "", false
		}
		sub, ok := s.Properties[name]
		if !ok {
			return "", false
		}
		schema = sub
	}
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return "", true
	}
	switch t := s.Type.(type) {
	case string:
		return t, true
	case []any:
		var named []string
		for _, v := range t {
			if n, ok := v.(string); ok && n != "null" {
				named = append(named, n)
			}
		}
		if len(named) == 1 {
			return named[0], true
		}
	}
	return "", true
}
