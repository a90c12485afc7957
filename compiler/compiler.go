package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// Options configures a compilation.
type Options struct {
	// Schema is the policy schema (default: the builtins plus every custom
	// middleware registered with the runtime).
	Schema *dsl.Schema
	// Timeout bounds the CUE evaluation (default dsl.DefaultTimeout).
	Timeout time.Duration
	// StopAfter ends the compilation after the named stage ("" runs all).
	StopAfter string
	// NoOrderCheck skips the check-order stage: the plan of a policy that
	// breaks an ordering rule is lowered anyway (agentc prove explores what
	// such a policy does instead of what a rule says about it).
	NoOrderCheck bool
}

// Compilation is the state the stages share and the result of Compile.
type Compilation struct {
	// Paths are the policy paths given.
	Paths []string
	// Policy is the loaded policy (nil when loading failed).
	Policy *dsl.Policy
	// Diagnostics holds every problem found, sorted by position.
	Diagnostics dsl.Diagnostics
	// Predicates holds the checked form of every CEL predicate, by the
	// expression it was written as.
	Predicates map[*dsl.Expr]*plan.Predicate
	// Plan is the lowered plan (nil unless every stage ran without
	// errors).
	Plan *plan.Plan
	// Stages lists the stages that ran.
	Stages []string

	opts Options
	// byPlace indexes Predicates by place and source (checkedPredicate),
	// when Predicates held indexed of them.
	byPlace map[exprPlace]*plan.Predicate
	indexed int
	// stateValue is the schema of the value a state handler's predicate
	// reads, while checkStateExpr checks one (knownValues).
	stateValue json.RawMessage
	// argRegexps holds the schema patterns argPatterns compiled, by
	// source (nil for one Go does not compile).
	argRegexps map[string]*regexp.Regexp
}

// exprPlace is where an expression is written, and what it says.
type exprPlace struct {
	pos    dsl.Pos
	source string
}

// Stage is one step of the compiler.
type Stage struct {
	// Name is a verb-noun name, such as "compile-cel".
	Name string
	// Doc says what the stage needs and what it produces.
	Doc string
	run func(ctx context.Context, c *Compilation) error
}

// Stages is the compiler's stage table, in order.
var Stages = []Stage{
	{"load-policy", "parse the files, unify with #Policy, decode the model, check references and stages; on errors, also run the config and model checks and the CEL checks of the parts they cannot mislead (needs: paths; gives: Policy)", loadPolicy},
	{"validate-configs", "decode each entry's config into its registered module and run the module's own Validate, as Build does before it provisions; check the models' provider fields (needs: Policy)", validateConfigs},
	{"compile-cel", "parse and type-check every CEL predicate against its stage's variables (needs: Policy; gives: Predicates)", compileCEL},
	{"check-order", "check the ordering constraints and run the vet rule suite (needs: Policy, Predicates)", checkOrder},
	{"lower", "lower the policy to the plan (needs: Policy, Predicates; gives: Plan)", lower},
}

// Compile runs the stage table over the policy at paths. It returns an
// error only for unusable paths (a *dsl.IOError), for an invalid option or
// when ctx ends; every problem with the policy is a diagnostic.
func Compile(ctx context.Context, paths []string, opts Options) (*Compilation, error) {
	if opts.StopAfter != "" && stageIndex(opts.StopAfter) < 0 {
		return nil, fmt.Errorf("unknown compiler stage %q", opts.StopAfter)
	}
	if opts.Schema == nil {
		s, err := DefaultSchema()
		if err != nil {
			return nil, err
		}
		opts.Schema = s
	}
	c := &Compilation{Paths: paths, Predicates: map[*dsl.Expr]*plan.Predicate{}, opts: opts}
	// The CEL parser builds its tables on first use; build them on another
	// core while CUE evaluates the policy.
	warm := make(chan struct{})
	go func() {
		defer close(warm)
		predicate.Warm()
	}()
	defer func() { <-warm }()
	// The deadline covers the whole compilation, not only CUE's evaluation:
	// each later stage starts only while time remains.
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = dsl.DefaultTimeout
	}
	deadline := now().Add(timeout)
	for _, st := range Stages {
		if opts.NoOrderCheck && st.Name == "check-order" {
			continue
		}
		if len(c.Stages) > 0 && now().After(deadline) {
			at := dsl.Pos{}
			if len(paths) > 0 {
				at.File = paths[0]
			}
			c.report(dsl.Errorf(at, "cue/syntax", "compilation did not finish within %s (stopped before %s); simplify the policy", timeout, st.Name))
			break
		}
		if err := st.run(ctx, c); err != nil {
			return nil, err
		}
		c.Stages = append(c.Stages, st.Name)
		c.Diagnostics = c.Diagnostics.Sort()
		if c.Diagnostics.HasErrors() || st.Name == opts.StopAfter {
			break
		}
	}
	if c.Diagnostics.HasErrors() {
		c.Plan = nil
	}
	return c, nil
}

func stageIndex(name string) int {
	for i, s := range Stages {
		if s.Name == name {
			return i
		}
	}
	return -1
}

func (c *Compilation) report(d ...dsl.Diagnostic) { c.Diagnostics = append(c.Diagnostics, d...) }

func loadPolicy(ctx context.Context, c *Compilation) error {
	p, diags, err := dsl.Load(ctx, c.Paths, dsl.Options{Schema: c.opts.Schema, Timeout: c.opts.Timeout, KeepPartial: true})
	if err != nil {
		return err
	}
	c.report(diags...)
	if diags.HasErrors() {
		// The stages after this one do not run, but the entries that
		// decoded whole are checked by their modules now, and the
		// predicates that read no part with an error are type-checked,
		// so that one round reports every kind of error. The ordering
		// is not checked: its rules reason over whole chains.
		if p != nil {
			checkModelsOf(c, p, true)
			validateEntries(c, p, true)
			checkCELPartly(c, p)
		}
		return nil
	}
	c.Policy = p
	return nil
}

// now is the compiler's time source (a test moves it).
var now = time.Now
