package vet

import "github.com/agentc-dev/agentc/dsl"

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
		d := &dsl.Diagnostic{Pos: pos, Severity: v.Constraint.Severity, Message: msg, Related: related}
		byPos[pos] = d
		out = append(out, d)
	}
	for _, d := range out {
		p.Report(*d)
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
