package vet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
)

// reportConstraint reports the violated pairs of the builtin constraints
// with id, phrased by say, at the constraint's severity. It is the Run of
// the rules that are plain orderings: the checker decides, the rule's file
// only says what goes wrong in the user's terms. Violations placed at the
// same layer (an output_coerce outside two retries) make one diagnostic,
// phrased for the first, with every other layer as a related position.
func reportConstraint(p *Pass, id string, say func(v *Pair) (pos dsl.Pos, related []dsl.Related, message string)) {
	var out []*dsl.Diagnostic
	byPos := map[dsl.Pos]*dsl.Diagnostic{}
	for _, v := range p.Violations(id, true) {
		pos, related, msg := say(v)
		if d := byPos[pos]; d != nil {
			d.Related = append(d.Related, related...)
			continue
		}
		if v.WhenErr != nil {
			msg += " (when could not be evaluated: " + v.WhenErr.Error() + ")"
		}
		if v.Depends {
			// The rule keeps its severity: the layers are not known to
			// meet, but nothing shows that they never do.
			msg += dependsNote(false, v.Outer, v.Inner)
		}
		d := &dsl.Diagnostic{Pos: pos, Severity: v.Constraint.Severity, Message: msg, Related: related}
		byPos[pos] = d
		out = append(out, d)
	}
	for _, d := range out {
		p.Report(*d)
	}
}

// warningRule is the rule of the builtin constraint id, of severity
// warning, whose violations say phrases.
func warningRule(id, doc string, say func(v *Pair) (dsl.Pos, []dsl.Related, string)) *Rule {
	return &Rule{
		Name:     "order/" + id,
		Severity: dsl.Warning,
		Doc:      doc,
		Run:      func(p *Pass) { reportConstraint(p, id, say) },
	}
}

// dependsNote says that whether a finding about chat layers happens
// depends on their `when`s, quoting them in chain order, and, when warning
// is set, that the finding is a warning on that account.
func dependsNote(warning bool, entries ...*dsl.Entry) string {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(x, y *dsl.Entry) int { return x.Index - y.Index })
	var whens []string
	for _, e := range entries {
		if e.When != nil {
			whens = append(whens, fmt.Sprintf("%s when %q", e.Ref(), e.When.Source))
		}
	}
	note := "whether it happens depends on " + strings.Join(whens, " and ") + ", beyond the model called"
	if warning {
		note = "a warning: " + note
	}
	return " (" + note + ")"
}

// reaching names what a layer of stage wraps, for messages.
func callee(stage string) string {
	switch stage {
	case "chat":
		return "the model"
	case "tool":
		return "the tool"
	}
	return "the turn"
}

// scopeApart says how two layers of one stage are kept from wrapping the
// same calls: tools: in the tool chain, a when on the model elsewhere
// (tools: is refused outside the tool chain).
func scopeApart(stage string) string {
	switch stage {
	case "tool":
		return "scope them with tools: to different tools"
	case "chat":
		return "scope them with when: to different models (request.model)"
	}
	return "scope them with when: to different turns"
}
