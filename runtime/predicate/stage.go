package predicate

import "fmt"

// Stage names the call a predicate is evaluated around. Its values are the chain names of the
// policy language (docs/language.md).
type Stage string

// The stages of the policy language.
const (
	Chat  Stage = "chat"
	Tool  Stage = "tool"
	Turn  Stage = "turn"
	Admit Stage = "admit"
	// State is the stage of a state field's handlers (deny, set): `value`, `state`, `field`
	// and `run`, typed from the fields' schemas (EnvConfig.ValueSchema, StateSchema).
	State Stage = "state"
)

// Valid reports whether s is one of the stages.
func (s Stage) Valid() bool {
	switch s {
	case Chat, Tool, Turn, Admit, State:
		return true
	}
	return false
}

// Phase says whether a predicate runs before the wrapped call or after it returned. After-phase
// predicates see the call's outcome (response, result, output and status).
type Phase string

// The phases of a guard. The zero Phase means Before.
const (
	Before Phase = "before"
	After  Phase = "after"
)

// normalize maps the zero phase to Before.
func (p Phase) normalize() Phase {
	if p == "" {
		return Before
	}
	return p
}

// validate reports an error when the stage/phase pair does not exist: an unknown stage or phase,
// or the after phase of admit (an admission check wraps no call).
func validateStagePhase(s Stage, p Phase) error {
	if !s.Valid() {
		return fmt.Errorf("unknown stage %q (want chat, tool, turn, admit or state)", string(s))
	}
	switch p {
	case Before:
	case After:
		if s == Admit || s == State {
			return fmt.Errorf("stage %s has no after phase", s)
		}
	default:
		return fmt.Errorf("unknown phase %q (want before or after)", string(p))
	}
	return nil
}
