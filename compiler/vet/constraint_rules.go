package vet

import "github.com/agentc-dev/agentc/dsl"

// reportConstraint reports each violated pair of the builtin constraints
// with id, phrased by say, at the constraint's severity. It is the Run of
// the rules that are plain orderings: the checker decides, the rule's file
// only says what goes wrong in the user's terms.
func reportConstraint(p *Pass, id string, say func(v *Pair) (pos dsl.Pos, related []dsl.Related, message string)) {
	for _, v := range p.Violations(id, true) {
		pos, related, msg := say(v)
		if v.WhenErr != nil {
			msg += " (when could not be evaluated: " + v.WhenErr.Error() + ")"
		}
		p.Report(dsl.Diagnostic{Pos: pos, Severity: v.Constraint.Severity, Message: msg, Related: related})
	}
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
