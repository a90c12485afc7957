package vet

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/agentc-dev/agentc/dsl"
)

// The CEL environments of the ordering analysis. They are small and untyped
// on purpose: the compile-cel stage type-checks predicates against their
// stage's real declarations; here a predicate only has to be evaluated
// statically, as far as the configs and the declared tools allow.
var (
	envOnce       sync.Once
	constraintEnv *cel.Env // `outer` and `inner`: the two entries' configs
	toolEnv       *cel.Env // the tool stage's variables, all dyn
	envErr        error
)

// toolVars are the tool stage's CEL variables. Only `tool` is known
// statically (from the policy's tools); the others are unknown.
var toolVars = []string{"tool", "args", "run", "result"}

func envs() error {
	envOnce.Do(func() {
		constraintEnv, envErr = cel.NewEnv(
			cel.Variable("outer", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("inner", cel.MapType(cel.StringType, cel.DynType)),
		)
		if envErr != nil {
			return
		}
		var opts []cel.EnvOption
		for _, v := range toolVars {
			opts = append(opts, cel.Variable(v, cel.DynType))
		}
		toolEnv, envErr = cel.NewEnv(opts...)
	})
	return envErr
}

// whenProgram is a constraint's compiled `when`.
type whenProgram struct {
	prg cel.Program
}

// builtinWhens caches the compiled `when` of the builtins' constraints,
// which live as long as their schema; the policy's own are compiled per
// analysis.
var builtinWhens sync.Map // *dsl.Constraint -> *whenProgram

// constraintWhen returns the compiled `when` of c, compiling it once.
func constraintWhen(c *dsl.Constraint) (*whenProgram, *dsl.Diagnostic) {
	if !c.Builtin {
		return compileConstraintWhen(c)
	}
	if w, ok := builtinWhens.Load(c); ok {
		return w.(*whenProgram), nil
	}
	w, d := compileConstraintWhen(c)
	if d == nil {
		builtinWhens.Store(c, w)
	}
	return w, d
}

// compileConstraintWhen compiles c.When over `outer` and `inner`. A problem
// is returned as a diagnostic positioned in the constraint's string.
func compileConstraintWhen(c *dsl.Constraint) (*whenProgram, *dsl.Diagnostic) {
	if err := envs(); err != nil {
		d := dsl.Errorf(c.When.Pos, "cel/type", "constraint %s: when: %v", c.ID, err)
		return nil, &d
	}
	ast, iss := constraintEnv.Compile(c.When.Source)
	if iss.Err() != nil {
		e := iss.Errors()[0]
		rule := "cel/type"
		if ast == nil || !ast.IsChecked() {
			rule = "cel/syntax"
		}
		pos := c.When.Pos
		if loc := e.Location; loc != nil && loc.Line() == 1 {
			pos = c.When.PosAt(loc.Column())
		}
		d := dsl.Errorf(pos, rule, "constraint %s: when: %s", c.ID, e.Message)
		return nil, &d
	}
	if !ast.OutputType().IsAssignableType(cel.BoolType) {
		d := dsl.Errorf(c.When.Pos, "cel/not-bool", "constraint %s: when has type %s; it must be bool", c.ID, ast.OutputType())
		return nil, &d
	}
	prg, err := constraintEnv.Program(ast)
	if err != nil {
		d := dsl.Errorf(c.When.Pos, "cel/type", "constraint %s: when: %v", c.ID, err)
		return nil, &d
	}
	return &whenProgram{prg: prg}, nil
}

// eval evaluates the condition for one pair of entries. An evaluation error
// (a missing key, a type mismatch) is returned with ok true: a constraint
// that cannot be ruled out is checked.
func (w *whenProgram) eval(outer, inner *dsl.Entry) (ok bool, err error) {
	out, _, err := w.prg.Eval(map[string]any{"outer": fieldsOf(outer), "inner": fieldsOf(inner)})
	if err != nil {
		return true, err
	}
	b, isBool := out.(types.Bool)
	if !isBool {
		return true, fmt.Errorf("when gave %v, not a bool", out)
	}
	return bool(b), nil
}

func fieldsOf(e *dsl.Entry) map[string]any {
	if e.Fields == nil {
		return map[string]any{}
	}
	return e.Fields
}

// staticPredicate is a tool-stage predicate (an entry's `when`, a guard's
// `deny` or `require`) compiled for partial evaluation: `tool` is bound
// from the policy's tools, every other variable is unknown.
type staticPredicate struct {
	prg cel.Program
}

var unknownExceptTool = func() []*cel.AttributePatternType {
	var out []*cel.AttributePatternType
	for _, v := range toolVars[1:] {
		out = append(out, cel.AttributePattern(v))
	}
	return out
}()

// compileStatic compiles src for partial evaluation, or returns nil when it
// does not compile (compile-cel reports that).
func compileStatic(src string) *staticPredicate {
	if envs() != nil {
		return nil
	}
	ast, iss := toolEnv.Compile(src)
	if iss.Err() != nil {
		return nil
	}
	prg, err := toolEnv.Program(ast, cel.EvalOptions(cel.OptPartialEval))
	if err != nil {
		return nil
	}
	return &staticPredicate{prg: prg}
}

// eval evaluates the predicate for calls of tool t (nil: a tool the policy
// does not declare, about which nothing is known). known is false when the
// result depends on the call (its arguments, the run) or cannot be
// evaluated.
func (s *staticPredicate) eval(t *dsl.Tool) (value, known bool) {
	if s == nil {
		return false, false
	}
	vars := map[string]any{}
	unknowns := unknownExceptTool
	if t != nil {
		vars["tool"] = map[string]any{"name": t.Name, "side_effecting": t.SideEffecting, "url_arg": t.URLArg}
	} else {
		unknowns = append(append([]*cel.AttributePatternType{}, unknowns...), cel.AttributePattern("tool"))
	}
	act, err := cel.PartialVars(vars, unknowns...)
	if err != nil {
		return false, false
	}
	out, _, err := s.prg.Eval(act)
	if err != nil {
		return false, false
	}
	return boolValue(out)
}

func boolValue(v ref.Val) (value, known bool) {
	if b, ok := v.(types.Bool); ok {
		return bool(b), true
	}
	return false, false
}
