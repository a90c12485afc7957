package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/agentc-dev/agentc/runtime"
)

// stepKinds lists the fields of which a step has exactly one.
const stepKinds = "chat, tool, admit, turn, agent, parallel, state, checkpoint, crash, resume"

// StateStep sets, appends to or reads a state field of the run
// (runtime.Pipeline.SetState, AppendState, GetState): exactly one of Set,
// Append and Get names the field; Value is what set or append passes.
type StateStep struct {
	Set    string          `json:"set,omitempty"`
	Append string          `json:"append,omitempty"`
	Get    string          `json:"get,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`
}

func (s *StateStep) check() error {
	n := 0
	for _, f := range []string{s.Set, s.Append, s.Get} {
		if f != "" {
			n++
		}
	}
	switch {
	case n != 1:
		return errors.New("exactly one of set, append and get names the field")
	case s.Get != "" && s.Value != nil:
		return errors.New("get takes no value")
	case s.Get == "" && len(bytes.TrimSpace(s.Value)) == 0:
		return errors.New("set and append need a value")
	}
	return nil
}

// StateSummary is the run's state after the steps: the fields set and the
// background queue's counters (after it drained).
type StateSummary struct {
	Fields     map[string]any     `json:"fields"`
	Background runtime.StateStats `json:"background"`
}

// state runs a state step. Its result carries the value stored (set,
// append) or read (get; absent when the field is not set).
func (r *runner) state(ctx context.Context, i int, st *StateStep) StepResult {
	sr := StepResult{Index: i, Stage: "state"}
	var (
		v   any
		err error
	)
	// A field the policy does not declare was refused before the run
	// (checkStateField).
	switch {
	case st.Get != "":
		v, _ = r.pl.GetState(ctx, st.Get)
	default:
		var value any
		if err = json.Unmarshal(st.Value, &value); err != nil {
			break
		}
		if st.Set != "" {
			v, err = r.pl.SetState(ctx, st.Set, value)
		} else {
			v, err = r.pl.AppendState(ctx, st.Append, value)
		}
	}
	if err == nil {
		sr.Result = v
	}
	setOutcome(&sr, err)
	return sr
}
