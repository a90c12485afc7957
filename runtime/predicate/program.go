package predicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// MaxEvalTime bounds one evaluation of a predicate whose cost is not bounded
// for every input (a cost-tracked program).
const MaxEvalTime = 250 * time.Millisecond

var errEvalTime = fmt.Errorf("evaluation took longer than %s", MaxEvalTime)

// ErrCostLimit is wrapped by the evaluation error of a program that exceeded its cost limit.
var ErrCostLimit = errors.New("cost limit exceeded")

// EvalError is the error of a failed evaluation: a missing key or field, a type mismatch in dyn
// data, an exceeded cost limit (errors.Is(err, ErrCostLimit)), or cancellation. The caller decides
// whether the predicate fails open or closed.
type EvalError struct {
	Source string
	Err    error
}

// Error implements error.
func (e *EvalError) Error() string {
	src := e.Source
	if len(src) > 80 {
		src = src[:77] + "..."
	}
	return fmt.Sprintf("evaluate %q: %v", src, e.Err)
}

// Unwrap returns the underlying error.
func (e *EvalError) Unwrap() error { return e.Err }

// Program is an evaluable predicate. It is safe for concurrent use.
type Program struct {
	checked *Checked
	prg     cel.Program
	// tracked is set when the runtime cost tracker enforces the cost limit.
	tracked bool
}

// Checked returns the predicate the program was built from.
func (p *Program) Checked() *Checked { return p.checked }

// Source returns the predicate text.
func (p *Program) Source() string { return p.checked.Source }

// CostTracked reports whether evaluation runs under the runtime cost limit. It does not when
// the static estimate bounds the cost below the limit for any input.
func (p *Program) CostTracked() bool { return p.tracked }

// Program builds the evaluable program of a predicate checked in this environment.
func (e *Env) Program(c *Checked) (p *Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("plan predicate: internal error: %v", r)
		}
	}()
	if c == nil || c.env != e {
		return nil, errors.New("predicate was not checked in this environment")
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.CustomDecoratorV2(boundMatches), cel.CustomDecoratorV2(exactNumbers)}
	tracked := !c.bounded
	if tracked {
		opts = append(opts,
			cel.CostLimit(e.cfg.CostLimit),
			cel.CostTrackerOptions(runtimeCostOptions()...),
			cel.InterruptCheckFrequency(64),
		)
	}
	prg, err := e.cel.Program(c.ast, opts...)
	if err != nil {
		return nil, fmt.Errorf("plan %q: %w", c.Source, err)
	}
	return &Program{checked: c, prg: prg, tracked: tracked}, nil
}

// Compile checks src and builds its program.
func (e *Env) Compile(src string) (*Program, []Issue) {
	return e.compile(src, nil)
}

// compile checks src where the paths of given are present (CheckGiven) and
// builds its program.
func (e *Env) compile(src string, given []string) (*Program, []Issue) {
	c, iss := e.CheckGiven(src, given)
	if len(iss) > 0 {
		return nil, iss
	}
	p, err := e.Program(c)
	if err != nil {
		return nil, []Issue{{Rule: RuleType, Line: 1, Col: 1, Message: err.Error()}}
	}
	return p, nil
}

// Eval evaluates the predicate over vars (a *ChatVars, *ToolVars, *TurnVars or *AdmitVars
// matching the stage, or any Activation). A program whose cost is bounded for any input ignores
// ctx after checking it once; a cost-tracked one is also interrupted when ctx is done. Errors are
// *EvalError.
func (p *Program) Eval(ctx context.Context, vars Activation) (bool, error) {
	out, err := p.eval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, &EvalError{Source: p.checked.Source, Err: fmt.Errorf("result is %T, want bool", out)}
	}
	return bool(b), nil
}

// eval evaluates the program as Eval describes and returns the CEL result.
func (p *Program) eval(ctx context.Context, vars Activation) (ref.Val, error) {
	if err := ctx.Err(); err != nil {
		return nil, &EvalError{Source: p.checked.Source, Err: err}
	}
	var (
		out ref.Val
		err error
	)
	if p.tracked {
		// A cost-tracked evaluation is interrupted by its cost limit, by
		// the caller's context and by MaxEvalTime, whichever comes first.
		dl := startDeadline(ctx)
		v, _, e := p.prg.ContextEval(dl, vars)
		if e != nil && dl.expired() && ctx.Err() == nil {
			e = errEvalTime
		}
		dl.release()
		out, err = v, e
	} else {
		v, _, e := p.prg.Eval(vars)
		out, err = v, e
	}
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			err = fmt.Errorf("%w (limit %d)", ErrCostLimit, p.checked.env.cfg.CostLimit)
		}
		return nil, &EvalError{Source: p.checked.Source, Err: err}
	}
	return out, nil
}

// Spec is the plan form of a predicate: its checked source plus what selects its environment.
type Spec struct {
	Stage       Stage             `json:"stage"`
	Phase       Phase             `json:"phase"`
	Source      string            `json:"source"`
	ArgsSchemas []json.RawMessage `json:"args_schemas,omitempty"`
	// CostLimit is set only when the compiler used a limit other than DefaultCostLimit.
	CostLimit uint64 `json:"cost_limit,omitempty"`
	// ValueSchema, StateSchema and Value select a state-stage environment (EnvConfig).
	ValueSchema json.RawMessage `json:"value_schema,omitempty"`
	StateSchema json.RawMessage `json:"state_schema,omitempty"`
	Value       bool            `json:"value,omitempty"`
	// Given are the paths known present where the predicate runs (CheckGiven).
	Given []string `json:"given,omitempty"`
}

// CompileSpec rebuilds the environment of a spec and compiles its source, as the runtime does
// at Build. A spec that no longer checks (for instance a plan from another agentc version)
// fails with an error listing the issues.
func CompileSpec(spec Spec) (*Program, error) {
	env, err := NewEnv(EnvConfig{Stage: spec.Stage, Phase: spec.Phase, ArgsSchemas: spec.ArgsSchemas, CostLimit: spec.CostLimit,
		ValueSchema: spec.ValueSchema, StateSchema: spec.StateSchema, Value: spec.Value})
	if err != nil {
		return nil, err
	}
	p, iss := env.compile(spec.Source, spec.Given)
	if len(iss) > 0 {
		msgs := make([]string, len(iss))
		for i, is := range iss {
			msgs[i] = is.String()
		}
		return nil, fmt.Errorf("compile %s predicate %q: %s", spec.Stage, spec.Source, strings.Join(msgs, "; "))
	}
	return p, nil
}

func cloneSchemas(s []json.RawMessage) []json.RawMessage {
	if s == nil {
		return nil
	}
	out := make([]json.RawMessage, len(s))
	for i, r := range s {
		out[i] = append(json.RawMessage(nil), r...)
	}
	return out
}

func specCostLimit(limit uint64) uint64 {
	if limit == DefaultCostLimit {
		return 0
	}
	return limit
}
