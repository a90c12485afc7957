// Package invariant is the CEL environment of a policy's own invariants
// (the `invariants.custom` section), which agentc vet type-checks and
// agentc prove evaluates after every explored run (docs/prove.md).
package invariant

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// The variables of an invariant: the run's trace.
var Variables = []struct{ Name, Doc string }{
	{"steps", "the result of each step, as `agentc run -json` prints it (stage, outcome, attempts, error, deduped, steps of a parallel step)"},
	{"executions", "how many times each model and tool really ran: {models: {name: n}, tools: {name: n}}"},
	{"audit", "the audit outcome records: {tool, stage, layer, decision, attempts, error_type}"},
	{"meter", "the chat ledger: {input_tokens, output_tokens, usd, calls}"},
	{"crashed", "whether the process crashed during the run"},
	{"target", "what the run called: {stage: \"chat\" or \"tool\", name}"},
}

// CostLimit bounds the evaluation cost of one invariant.
const CostLimit = 1_000_000

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// Env returns the environment of invariants: every variable is dynamic
// except crashed (bool) and target (map of strings).
func Env() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("steps", cel.ListType(cel.DynType)),
			cel.Variable("executions", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("audit", cel.ListType(cel.DynType)),
			cel.Variable("meter", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("crashed", cel.BoolType),
			cel.Variable("target", cel.MapType(cel.StringType, cel.StringType)),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserRecursionLimit(predicate.MaxNestingDepth),
			cel.ParserExpressionSizeLimit(predicate.MaxSourceBytes),
		)
	})
	return env, envErr
}

// Issue is a problem with an invariant, at a byte offset of its source.
type Issue struct {
	Offset  int
	Message string
	// Syntax is set for a parse error (else the expression does not
	// type-check, or is not a bool).
	Syntax bool
}

// Compile parses and type-checks an invariant. It returns the program, or
// the issues (first syntax, then type errors) that stop it.
func Compile(src string) (cel.Program, []Issue) {
	e, err := Env()
	if err != nil {
		return nil, []Issue{{Message: err.Error()}}
	}
	ast, iss := e.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, issues(src, iss.Errors(), true)
	}
	checked, iss := e.Check(ast)
	if iss != nil && iss.Err() != nil {
		return nil, issues(src, iss.Errors(), false)
	}
	if t := checked.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, []Issue{{Message: fmt.Sprintf("an invariant must be a bool, this one is %s", t)}}
	}
	prg, err := e.Program(checked, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, []Issue{{Message: err.Error()}}
	}
	return prg, nil
}

func issues(src string, errs []*cel.Error, syntax bool) []Issue {
	var out []Issue
	for _, e := range errs {
		out = append(out, Issue{Offset: offset(src, e.Location), Message: e.Message, Syntax: syntax})
	}
	return out
}

// offset converts a CEL location (line from 1, column from 0, in code
// points) to a byte offset of src.
func offset(src string, loc common.Location) int {
	if loc == nil || loc.Line() < 1 {
		return 0
	}
	off := 0
	lines := strings.SplitAfter(src, "\n")
	for i := 0; i < loc.Line()-1 && i < len(lines); i++ {
		off += len(lines[i])
	}
	if loc.Line()-1 < len(lines) {
		col := 0
		for i := range lines[loc.Line()-1] {
			if col == loc.Column() {
				return off + i
			}
			col++
		}
		return off + len(lines[loc.Line()-1])
	}
	return off
}
