package compiler

import (
	"fmt"
	"slices"

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
