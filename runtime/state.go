package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// State operations. A run's state fields are declared by the policy's state
// section: each has a JSON Schema and handlers that run, in declaration
// order, on every set (on_set) and append (on_append). A deny handler vetoes
// the operation (a *BlockedError naming the handler, "state.notes.on_set[0]")
// and the later handlers do not run; redact, truncate and set rewrite the
// value. The value is checked against the field's schema before the
// handlers (the handlers' CEL was typed against it) and after them. Then
// the field's background sinks are told of the operation, vetoed or not,
// through a bounded queue (StateStats counts what it dropped).

// The state operations a background event names.
const (
	StateOpSet    = "set"
	StateOpAppend = "append"
)

// secretMark is what background sinks see of a secret field's value that no
// redact handler rewrote.
const secretMark = "[SECRET]"

// stateEngine is the compiled state section of a plan.
type stateEngine struct {
	fields map[string]*stateField
	queue  *stateQueue
}

type stateField struct {
	name   string
	secret bool
	// schema checks a set value, items an appended element (nil: any).
	schema, items *jsonschema.Schema
	onSet         []stateHandler
	onAppend      []stateHandler
	sinks         []stateSink
}

type stateHandler struct {
	// name is "state.<field>.<op>[i]", the layer of a veto.
	name        string
	deny        *predicate.Program
	message     string
	redact      []*regexp.Regexp
	isRedact    bool
	replacement string
	truncate    int
	set         *predicate.Program
}

// buildState compiles the plan's state section: schemas, handlers'
// programs and background sinks. A plan without one has no state fields.
func (pl *Pipeline) buildState(ctx context.Context) error {
	ps := pl.plan.State
	if ps == nil || len(ps.Fields) == 0 {
		return nil
	}
	e := &stateEngine{fields: map[string]*stateField{}}
	obj := ps.ObjectSchema()
	var sinks int
	for _, name := range slices.Sorted(maps.Keys(ps.Fields)) {
		pf := ps.Fields[name]
		f := &stateField{name: name, secret: pf.Secret}
		var err error
		if f.schema, err = compileArgs(pf.Schema); err != nil {
			return fmt.Errorf("build state.fields.%s.schema: %w", name, err)
		}
		if f.items, err = compileArgs(pf.ValueSchema(plan.StateOnAppend)); err != nil {
			return fmt.Errorf("build state.fields.%s.schema items: %w", name, err)
		}
		for _, op := range []string{plan.StateOnSet, plan.StateOnAppend} {
			list := pf.OnSet
			if op == plan.StateOnAppend {
				list = pf.OnAppend
			}
			for i, h := range list {
				sh, err := compileStateHandler(fmt.Sprintf("state.%s.%s[%d]", name, op, i), h, pf.ValueSchema(op), obj)
				if err != nil {
					return fmt.Errorf("build %s: %w", sh.name, err)
				}
				if op == plan.StateOnSet {
					f.onSet = append(f.onSet, sh)
				} else {
					f.onAppend = append(f.onAppend, sh)
				}
			}
		}
		for i, b := range pf.Background {
			s, err := pl.stateSink(ctx, name, b)
			if err != nil {
				return fmt.Errorf("build state.fields.%s.background[%d]: %w", name, i, err)
			}
			f.sinks = append(f.sinks, s)
			sinks++
		}
		e.fields[name] = f
	}
	if sinks > 0 {
		size := ps.Queue
		if size <= 0 {
			size = plan.DefaultStateQueue
		}
		e.queue = newStateQueue(size, pl.logger, pl.deps.StateHold)
	}
	pl.state = e
	return nil
}

func compileStateHandler(name string, h plan.StateHandler, valueSchema, stateSchema json.RawMessage) (stateHandler, error) {
	sh := stateHandler{name: name, message: h.Message, truncate: h.Truncate}
	compile := func(pr *plan.Predicate, value bool) (*predicate.Program, error) {
		if pr.Stage != plan.StageState {
			return nil, fmt.Errorf("predicate of stage %q in a state handler", pr.Stage)
		}
		return predicate.CompileSpec(predicate.Spec{Stage: predicate.State, Source: pr.Source, CostLimit: pr.CostLimit,
			ValueSchema: valueSchema, StateSchema: stateSchema, Value: value})
	}
	var err error
	if h.Deny != nil {
		if sh.deny, err = compile(h.Deny, false); err != nil {
			return sh, err
		}
	}
	if h.Set != nil {
		if sh.set, err = compile(h.Set, true); err != nil {
			return sh, err
		}
	}
	if h.Redact != nil {
		sh.isRedact, sh.replacement = true, h.Redact.Replacement
		for _, p := range h.Redact.Patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return sh, fmt.Errorf("redact pattern %q: %w", p, err)
			}
			sh.redact = append(sh.redact, re)
		}
	}
	if n := btoi(sh.deny != nil) + btoi(sh.set != nil) + btoi(sh.isRedact) + btoi(sh.truncate > 0); n != 1 {
		return sh, fmt.Errorf("a handler has exactly one of deny, redact, truncate and set (it has %d)", n)
	}
	return sh, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RunState is the state of one run that the runtime keeps for the host and
// for checkpoints: the state fields, the transcript and the tool results.
// The pipeline holds one per run id until the run is ended.
type RunState struct {
	// ops serializes the run's state operations from the handlers' snapshot
	// to the write, so concurrent operations are judged one after another
	// (a size guard cannot be passed by two appends at once).
	ops    sync.Mutex
	mu     sync.Mutex
	fields map[string]any
	// clean marks the secret fields whose every value passed one of the
	// field's redact handlers.
	clean map[string]bool
	// taint holds the secret strings of the run: a checkpoint refuses to
	// persist any of them.
	taint map[string]struct{}
	// transcript and tools are what a checkpoint saves of the conversation.
	transcript []Message
	tools      []ToolRecord
	// intent records the latest agent turn's tool calls (CallIntent).
	intent *CallIntent
	// version is the run's latest checkpoint version (0: none).
	version int
	status  RunStatus
}

// runStates holds the run states of a pipeline by run id.
type runStates struct {
	mu sync.Mutex
	m  map[string]*RunState
}

// runState returns the state of run id, creating it on first use; it
// counts as activity of the run (settings.run_idle).
func (pl *Pipeline) runState(id string) *RunState {
	if pl.runs != nil {
		pl.runs.touch(id)
	}
	pl.states.mu.Lock()
	defer pl.states.mu.Unlock()
	if pl.states.m == nil {
		pl.states.m = map[string]*RunState{}
	}
	s := pl.states.m[id]
	if s == nil {
		s = &RunState{fields: map[string]any{}, clean: map[string]bool{}, taint: map[string]struct{}{}, status: RunRunning}
		pl.states.m[id] = s
	}
	return s
}

// lookupRunState returns the state of run id, or nil when the run has
// none: the read paths create no entry for a run id they are given.
func (pl *Pipeline) lookupRunState(id string) *RunState {
	pl.states.mu.Lock()
	defer pl.states.mu.Unlock()
	return pl.states.m[id]
}

// readRunState returns what read returns of the state of run id, read
// under the state's lock, and false when id is "" or the run has no state
// in this process.
func readRunState[T any](pl *Pipeline, id string, read func(s *RunState) T) (T, bool) {
	var zero T
	if id == "" {
		return zero, false
	}
	s := pl.lookupRunState(id)
	if s == nil {
		return zero, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return read(s), true
}

// dropRunState forgets the state of run id.
func (pl *Pipeline) dropRunState(id string) {
	pl.states.mu.Lock()
	delete(pl.states.m, id)
	pl.states.mu.Unlock()
}

// errNoRun is the error of a state operation made without a run id.
var errNoRun = errors.New("state: the context carries no run id (use WithRun)")

// stateOf returns the field and the run state of an operation.
func (pl *Pipeline) stateOf(ctx context.Context, field string) (*stateField, *RunState, Run, error) {
	run := RunOf(ctx)
	if run.ID == "" {
		return nil, nil, run, errNoRun
	}
	var f *stateField
	if pl.state != nil {
		f = pl.state.fields[field]
	}
	if f == nil {
		return nil, nil, run, fmt.Errorf("state field %q is not declared in the policy's state", field)
	}
	return f, pl.runState(run.ID), run, nil
}

// SetState sets the state field of the run ctx carries (WithRun) to value,
// after the field's on_set handlers, and returns the value stored. A value
// that does not match the field's schema, before or after the handlers, and
// a veto, are a *BlockedError naming the field or the handler; the field
// then keeps its value. value is stored as its JSON form (numbers as
// float64).
func (pl *Pipeline) SetState(ctx context.Context, field string, value any) (any, error) {
	return pl.stateOp(ctx, field, StateOpSet, value)
}

// AppendState appends elem to the state field (an array) of the run ctx
// carries, after the field's on_append handlers (which see elem as
// `value`), and returns the element stored. Errors are as for SetState.
func (pl *Pipeline) AppendState(ctx context.Context, field string, elem any) (any, error) {
	return pl.stateOp(ctx, field, StateOpAppend, elem)
}

// GetState returns the value of the state field of the run ctx carries
// (a copy), and whether it is set.
func (pl *Pipeline) GetState(ctx context.Context, field string) (any, bool) {
	run := RunOf(ctx)
	if run.ID == "" {
		return nil, false
	}
	s := pl.lookupRunState(run.ID)
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.fields[field]
	if !ok {
		return nil, false
	}
	return cloneJSON(v), true
}

// StateFields returns a copy of every set state field of the run ctx
// carries.
func (pl *Pipeline) StateFields(ctx context.Context) map[string]any {
	run := RunOf(ctx)
	out := map[string]any{}
	if run.ID == "" {
		return out
	}
	s := pl.lookupRunState(run.ID)
	if s == nil {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.fields {
		out[k] = cloneJSON(v)
	}
	return out
}

func (pl *Pipeline) stateOp(ctx context.Context, field, op string, value any) (any, error) {
	if pl.closed.Load() {
		return nil, errClosedCall
	}
	f, s, run, err := pl.stateOf(ctx, field)
	if err != nil {
		return nil, err
	}
	v, err := exactJSONValue(value)
	if err != nil {
		return nil, &BlockedError{Layer: "state." + field, Message: fmt.Sprintf("the value is not JSON: %v", err)}
	}
	if jsonnum.HasInexact(v) {
		return nil, &BlockedError{Layer: "state." + field, Message: "the value holds a number neither a float64 nor an int64 holds exactly"}
	}
	s.ops.Lock()
	defer s.ops.Unlock()
	handlers, schema := f.onSet, f.schema
	if op == StateOpAppend {
		handlers, schema = f.onAppend, f.items
		if cur, ok := s.snapshotField(field); ok {
			if _, isList := cur.([]any); !isList {
				return nil, &BlockedError{Layer: "state." + field, Message: "the field holds no array to append to"}
			}
		}
	}
	if err := checkStateValue(field, "the value", schema, v); err != nil {
		return nil, err
	}
	original := v
	redacted := false
	state := s.snapshot()
	rinfo := runInfo(&run)
	for _, h := range handlers {
		switch {
		case h.deny != nil:
			vars, err := h.deny.StateActivation(rinfo, field, v, state)
			deny := true
			if err == nil {
				deny, err = h.deny.Eval(ctx, vars)
			}
			if err != nil || deny {
				msg := h.message
				if msg == "" {
					msg = fmt.Sprintf("denied by %s", h.deny.Source())
				}
				berr := &BlockedError{Layer: h.name, Message: msg, Err: err}
				if err != nil {
					berr.Message = "the handler could not decide (fail closed)"
				}
				pl.stateEvent(run.ID, f, op, v, f.secret && secretClean(original, v, redacted), berr)
				return nil, berr
			}
		case h.set != nil:
			prev := v
			vars, err := h.set.StateActivation(rinfo, field, v, state)
			if err == nil {
				v, err = h.set.EvalValue(ctx, vars)
			}
			if err != nil {
				berr := &BlockedError{Layer: h.name, Message: "the set handler failed", Err: err}
				// A secret field reports the value as the handlers left it
				// (a sink sees it only when clean), never the original.
				shown, clean := original, false
				if f.secret {
					shown, clean = prev, secretClean(original, prev, redacted)
				}
				pl.stateEvent(run.ID, f, op, shown, clean, berr)
				return nil, berr
			}
		case h.isRedact:
			nv := redactValue(v, h.redact, h.replacement)
			if !jsonEqual(nv, v) { // a redaction that matched nothing hides nothing
				redacted = true
			}
			v = nv
		case h.truncate > 0:
			v = truncateValue(v, h.truncate)
		}
	}
	if err := checkStateValue(field, "the handlers' result", schema, v); err != nil {
		return nil, err
	}
	clean := f.secret && secretClean(original, v, redacted)
	s.mu.Lock()
	if op == StateOpAppend {
		cur, _ := s.fields[field].([]any)
		list := append(slices.Clone(cur), v)
		// The list as it would be must match the field's own schema too
		// (its type, maxItems, uniqueItems).
		if err := checkStateValue(field, "the list after the append", f.schema, list); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.fields[field] = list
		s.clean[field] = clean && (len(cur) == 0 || s.clean[field])
	} else {
		s.fields[field] = v
		s.clean[field] = clean
	}
	if f.secret {
		addTaint(s.taint, original)
	}
	s.mu.Unlock()
	pl.stateEvent(run.ID, f, op, v, clean, nil)
	return cloneJSON(v), nil
}

// checkStateValue checks v against the field's schema (or items schema).
func checkStateValue(field, what string, s *jsonschema.Schema, v any) error {
	if s == nil {
		return nil
	}
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	msg := err.Error()
	if errors.As(err, &ve) {
		faults := valueFaults(ve, field)
		if len(faults) > maxArgFaults {
			faults = append(faults[:maxArgFaults], fmt.Sprintf("and %d more", len(faults)-maxArgFaults))
		}
		msg = strings.Join(faults, "; ")
	}
	return &BlockedError{Layer: "state." + field, Message: fmt.Sprintf("%s does not match the field's schema: %s", what, msg)}
}

// snapshot returns a copy of the run's fields (for the handlers' `state`).
func (s *RunState) snapshot() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]any, len(s.fields))
	for k, v := range s.fields {
		out[k] = cloneJSON(v)
	}
	return out
}

func (s *RunState) snapshotField(name string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.fields[name]
	return v, ok
}

// exactJSONValue returns the JSON form of v: nil, bool, float64, string,
// []any or map[string]any, never sharing memory with v, its numbers as
// DecodeArgs decodes them: an integer above 2^53 an int64, a number
// neither float64 nor int64 holds a json.Number of its text, never a
// neighbour (a state field's value, a tool result recorded for a resumed
// turn, arguments written to an audit record).
func exactJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := jsonnum.Decode(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// cloneJSON deep-copies a JSON value.
func cloneJSON(v any) any { return mapStrings(v, func(s string) string { return s }) }

// redactValue replaces the matches of res in every string of v (every
// whole string when res is empty).
func redactValue(v any, res []*regexp.Regexp, repl string) any {
	return mapStrings(v, func(s string) string {
		if len(res) == 0 {
			return repl
		}
		for _, re := range res {
			s = re.ReplaceAllLiteralString(s, repl)
		}
		return s
	})
}

// truncateValue bounds every string of v to n characters and every list
// to n elements.
func truncateValue(v any, n int) any {
	switch x := v.(type) {
	case []any:
		if len(x) > n {
			x = x[:n]
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = truncateValue(e, n)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = truncateValue(e, n)
		}
		return out
	case string:
		if utf8.RuneCountInString(x) > n {
			r := []rune(x)
			return string(r[:n])
		}
	}
	return v
}

// mapStrings returns v with f applied to every string (not to keys).
func mapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapStrings(e, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = mapStrings(e, f)
		}
		return out
	}
	return v
}
