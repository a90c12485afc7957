package vet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
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

// The limits on the predicates the analysis evaluates. They are those of
// the runtime predicates: the analysis must not take longer on a policy
// than the compiler does.
const (
	// maxExprNodes bounds the expression nodes after macro expansion.
	maxExprNodes = 4096
	// assumedSize is the size the cost estimate assumes for a string, list
	// or map read from a config or a tool: they come from the policy file,
	// which is small.
	assumedSize = 64
	// evalTimeout backs the cost limit up: an evaluation still running
	// after it is interrupted.
	evalTimeout = 2 * time.Second
)

// costLimit bounds both the estimated and the evaluated cost of a predicate.
const costLimit = predicate.DefaultCostLimit

func envs() error {
	envOnce.Do(func() {
		limits := []cel.EnvOption{
			cel.ParserRecursionLimit(predicate.MaxNestingDepth),
			cel.ParserExpressionSizeLimit(predicate.MaxSourceBytes),
			cel.ExpressionNodeLimit(maxExprNodes),
		}
		constraintEnv, envErr = cel.NewEnv(append(limits,
			cel.Variable("outer", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("inner", cel.MapType(cel.StringType, cel.DynType)),
		)...)
		if envErr != nil {
			return
		}
		opts := limits
		for _, v := range toolVars {
			opts = append(opts, cel.Variable(v, cel.DynType))
		}
		toolEnv, envErr = cel.NewEnv(opts...)
	})
	return envErr
}

// programOptions bound the evaluation of a predicate.
var programOptions = []cel.ProgramOption{
	cel.CostLimit(costLimit),
	cel.InterruptCheckFrequency(64),
}

// celIssue is one problem in a predicate: its rule, the byte offset into
// the source, and an agentc message.
type celIssue struct {
	rule    string
	offset  int
	message string
}

// checkPredicate parses, type-checks and cost-checks src in env, applying
// the limits the runtime predicates have. It returns the checked AST or the
// first problem.
func checkPredicate(env *cel.Env, src string) (*cel.Ast, *celIssue) {
	if !utf8.ValidString(src) {
		return nil, &celIssue{predicate.RuleSyntax, 0, "expression is not valid UTF-8"}
	}
	if len(src) > predicate.MaxSourceBytes {
		return nil, &celIssue{predicate.RuleSyntax, 0, fmt.Sprintf("expression longer than %d bytes (%d)", predicate.MaxSourceBytes, len(src))}
	}
	if strings.TrimSpace(src) == "" {
		return nil, &celIssue{predicate.RuleSyntax, 0, "empty expression"}
	}
	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil, firstIssue(predicate.RuleSyntax, src, iss)
	}
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, firstIssue(predicate.RuleType, src, iss)
	}
	start := len(src) - len(strings.TrimLeft(src, " \t\r\n"))
	if !checked.OutputType().IsAssignableType(cel.BoolType) {
		return nil, &celIssue{predicate.RuleNotBool, start, fmt.Sprintf("expression has type %s; it must be bool", checked.OutputType())}
	}
	est, err := env.EstimateCost(checked, assumedSizes{})
	if err != nil {
		return nil, &celIssue{predicate.RuleCost, start, "cannot estimate the cost: " + cleanMessage(err.Error())}
	}
	if est.Max >= math.MaxUint64/16 {
		return nil, &celIssue{predicate.RuleCost, start, "estimated cost is unbounded"}
	}
	if est.Max > costLimit {
		return nil, &celIssue{predicate.RuleCost, start, fmt.Sprintf("estimated cost %d exceeds the limit %d; iterate less", est.Max, costLimit)}
	}
	return checked, nil
}

// assumedSizes is the cost estimator of the analysis: every string, list or
// map read from a variable has at most assumedSize elements.
type assumedSizes struct{}

// EstimateSize implements checker.CostEstimator.
func (assumedSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: assumedSize}
}

// EstimateCallCost implements checker.CostEstimator.
func (assumedSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// firstIssue converts the first of cel-go's issues, placing it at a byte
// offset of src.
func firstIssue(rule, src string, iss *cel.Issues) *celIssue {
	return errorIssue(rule, src, iss.Errors()[0])
}

// errorIssue is the issue of one cel-go error.
func errorIssue(rule, src string, e *common.Error) *celIssue {
	msg := cleanMessage(e.Message)
	if strings.Contains(msg, "recursion") {
		msg = fmt.Sprintf("expression nests too deeply (more than %d levels)", predicate.MaxNestingDepth)
	}
	off := byteOffset(src, e.Location)
	// cel-go places field errors on the dot; the caret belongs under the
	// field name.
	for off < len(src) && src[off] == '.' {
		off++
		for off < len(src) && strings.IndexByte("? \t\r\n", src[off]) >= 0 {
			off++
		}
	}
	return &celIssue{rule, off, msg}
}

// byteOffset converts a cel-go location (1-based line, 0-based column in
// code points) into a byte offset of src.
func byteOffset(src string, loc common.Location) int {
	if loc == nil || loc.Line() < 1 {
		return 0
	}
	off := 0
	for line := 1; line < loc.Line(); line++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			return 0
		}
		off += i + 1
	}
	for n := 0; n < loc.Column() && off < len(src) && src[off] != '\n'; n++ {
		_, size := utf8.DecodeRuneInString(src[off:])
		off += size
	}
	return off
}

// cleanMessage turns a cel-go message into an agentc one: the first line
// only, lower-case, without the empty container note or the tokens the
// parser would have accepted.
func cleanMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.ReplaceAll(msg, " (in container '')", "")
	if i := strings.Index(msg, " expecting {"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimPrefix(msg, "Syntax error: ")
	msg = strings.Replace(msg, "mismatched input '<EOF>'", "unexpected end of expression", 1)
	msg = strings.Replace(msg, "mismatched input ", "unexpected ", 1)
	if r, size := utf8.DecodeRuneInString(msg); size > 0 && unicode.IsUpper(r) {
		if next, _ := utf8.DecodeRuneInString(msg[size:]); !unicode.IsUpper(next) {
			msg = string(unicode.ToLower(r)) + msg[size:]
		}
	}
	return msg
}

// evalBounded evaluates prg under the cost limit and the time limit.
func evalBounded(prg cel.Program, vars any) (ref.Val, error) {
	ctx, cancel := context.WithTimeout(context.Background(), evalTimeout)
	defer cancel()
	out, _, err := prg.ContextEval(ctx, vars)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			err = fmt.Errorf("%w (limit %d)", predicate.ErrCostLimit, costLimit)
		}
	}
	return out, err
}

// whenProgram is a constraint's compiled `when`.
type whenProgram struct {
	prg cel.Program
}

// builtinWhens caches the compiled `when` of the builtins' constraints,
// which live as long as their schema; the policy's own are compiled per
// analysis.
var builtinWhens sync.Map // *dsl.Constraint -> *whenProgram

// constraintWhen returns the compiled `when` of c, compiling it once. The
// policy's own conditions and those of custom middlewares are type-checked
// against the config types; the builtins' are by the tests (WhenProblem).
func constraintWhen(c *dsl.Constraint) (*whenProgram, *dsl.Diagnostic) {
	if !c.Builtin {
		return compileConstraintWhen(c, true)
	}
	if w, ok := builtinWhens.Load(c); ok {
		return w.(*whenProgram), nil
	}
	w, d := compileConstraintWhen(c, false)
	if d == nil {
		builtinWhens.Store(c, w)
	}
	return w, d
}

// compileConstraintWhen compiles c.When over `outer` and `inner`, type-
// checking it against the config types first when typed is set. A problem
// is returned as a diagnostic positioned in the constraint's string.
func compileConstraintWhen(c *dsl.Constraint, typed bool) (*whenProgram, *dsl.Diagnostic) {
	if err := envs(); err != nil {
		d := dsl.Errorf(c.When.Pos, "cel/type", "constraint %s: when: %v", c.ID, err)
		return nil, &d
	}
	ast, issue := checkPredicate(constraintEnv, c.When.Source)
	if issue == nil && typed {
		issue = typeCheckWhen(c)
	}
	if issue != nil {
		d := dsl.Errorf(c.When.PosAt(issue.offset), issue.rule, "constraint %s: when: %s", c.ID, issue.message)
		return nil, &d
	}
	prg, err := constraintEnv.Program(ast, programOptions...)
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
	out, err := evalBounded(w.prg, map[string]any{"outer": fieldsOf(outer), "inner": fieldsOf(inner)})
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
	ast, issue := checkPredicate(toolEnv, src)
	if issue != nil {
		return nil
	}
	prg, err := toolEnv.Program(ast, append([]cel.ProgramOption{cel.EvalOptions(cel.OptPartialEval)}, programOptions...)...)
	if err != nil {
		return nil
	}
	return &staticPredicate{prg: prg}
}

// WhenExcludes returns whether an entry's `when` src is false for every
// call of a declared tool, as Applies decides it (evaluated with tool
// bound to its declaration, the call unknown).
func WhenExcludes(src string) func(t *dsl.Tool) bool {
	s := compileStatic(src)
	return func(t *dsl.Tool) bool {
		v, known := s.eval(t)
		return known && !v
	}
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
		vars["tool"] = toolBinding(t)
	} else {
		unknowns = append(append([]*cel.AttributePatternType{}, unknowns...), cel.AttributePattern("tool"))
	}
	act, err := cel.PartialVars(vars, unknowns...)
	if err != nil {
		return false, false
	}
	out, err := evalBounded(s.prg, act)
	if err != nil {
		return false, false
	}
	return boolValue(out)
}

// toolBinding is the value of `tool` for calls of t: every field of the
// runtime's tool type (predicate.ToolInfo), so that a predicate reading any
// of them evaluates statically.
func toolBinding(t *dsl.Tool) map[string]any {
	return map[string]any{
		"name":           t.Name,
		"side_effecting": t.SideEffecting,
		"retry_safe":     t.RetrySafe,
		"url_arg":        t.URLArg,
		"path_arg":       t.PathArg,
	}
}

func boolValue(v ref.Val) (value, known bool) {
	if b, ok := v.(types.Bool); ok {
		return bool(b), true
	}
	return false, false
}

// WhenProblem compiles and type-checks the `when` of c over `outer` and
// `inner`, and checks its comparisons with the values the configs' fields
// may hold, and returns the first problem found, positioned in the
// constraint's string, or nil.
func WhenProblem(c *dsl.Constraint) *dsl.Diagnostic {
	if c.When == nil {
		return nil
	}
	if _, d := compileConstraintWhen(c, true); d != nil {
		return d
	}
	if ds := whenValueProblems(c); len(ds) > 0 {
		return &ds[0]
	}
	return nil
}
