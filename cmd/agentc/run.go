package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/agentc-dev/agentc/builtins/all" // the standard middlewares
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "run")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	trace := fs.Bool("trace", false, "print the tracing layers' spans")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	if err := scenarioApart(fs.Arg(0), fs.Arg(1)); err != nil {
		return fail(env, "%v", err)
	}
	p, code := loadPlan(ctx, env, fs.Arg(0))
	if p == nil {
		return code
	}
	sc, err := readScenario(ctx, env, fs.Arg(1))
	if se := (*scenarioError)(nil); errors.As(err, &se) {
		fmt.Fprintln(env.stderr, se.Error())
		return exitUsage
	}
	if err != nil {
		return fail(env, "%v", err)
	}
	// The tracing layers' spans are exported as agentc serve exports
	// them when the OTEL_* variables configure an exporter, and sent
	// before the command exits; its lines go to stderr.
	tp, flush, err := stderrTracing(ctx, env)
	if err != nil {
		return fail(env, "run: %v", err)
	}
	defer flush()
	res, err := scenario.Run(ctx, p, sc, scenario.Options{Trace: *trace, TracerProvider: tp, Dir: policyDir(fs.Arg(0))})
	var se *scenario.Error
	if errors.As(err, &se) {
		// The scenario names what the policy does not have: each
		// problem at its place, as vet's diagnostics are.
		placeCUE(se, fs.Arg(1))
		fmt.Fprintln(env.stderr, se.In(fs.Arg(1)))
		return exitUsage
	}
	if err != nil {
		// The error may be the plan's (a layer that does not build) or
		// the scenario's: name both.
		return fail(env, "run %s with %s: %v", fs.Arg(0), fs.Arg(1), err)
	}
	if w := scenario.UnusedWarnings(sc, res); w != nil {
		// Not a refusal: a scenario may script a call the policy
		// refuses. Each at its place, after the result.
		placeCUE(w, fs.Arg(1))
		defer func() {
			for _, line := range strings.Split(w.In(fs.Arg(1)), "\n") {
				fmt.Fprintln(env.stderr, "warning: "+line)
			}
		}()
	}
	if *asJSON {
		if err := writeJSON(env.stdout, res); err != nil {
			return fail(env, "%v", err)
		}
		return exitOK
	}
	if err := res.WriteText(env.stdout); err != nil {
		return fail(env, "%v", err)
	}
	if *trace {
		fmt.Fprintln(env.stdout, "trace:")
		if err := res.WriteTrace(env.stdout); err != nil {
			return fail(env, "%v", err)
		}
	}
	return exitOK
}

// loadPlan compiles the policy at paths (a directory, or .cue files), or
// loads it when paths is a plan (.json). It prints diagnostics and returns nil with the exit code on
// failure.
func loadPlan(ctx context.Context, env *cliEnv, paths ...string) (*plan.Plan, int) {
	p, _, code := loadPolicy(ctx, env, paths...)
	return p, code
}

// loadPolicy is loadPlan that also returns the policy the plan is compiled
// from (nil for a plan.json).
func loadPolicy(ctx context.Context, env *cliEnv, paths ...string) (*plan.Plan, *dsl.Policy, int) {
	if len(paths) == 1 && strings.HasSuffix(paths[0], ".json") {
		p, err := plan.Load(paths[0])
		if err != nil {
			return nil, nil, fail(env, "%v", err)
		}
		return p, nil, exitOK
	}
	c, err := compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout})
	if err != nil {
		return nil, nil, fail(env, "%v", err)
	}
	if err := printDiagnostics(env, c.Diagnostics.Relative(env.wd).Sort(), "text"); err != nil {
		return nil, nil, fail(env, "%v", err)
	}
	if c.Plan == nil {
		return nil, nil, exitProblems
	}
	return c.Plan, c.Policy, exitOK
}

// policyDir returns the directory whose relative paths a policy's plan
// uses: the policy directory, or the directory of its files or plan.
func policyDir(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return path
	}
	return filepath.Dir(path)
}

// readScenario reads a scenario from a JSON or CUE file, under the bounds
// of a policy file.
func readScenario(ctx context.Context, env *cliEnv, path string) (*scenario.Scenario, error) {
	data, err := dsl.LoadData(ctx, path, dsl.DataOptions{Timeout: env.timeout})
	if err != nil {
		return nil, err
	}
	parse := scenario.Parse
	if filepath.Ext(path) == ".cue" {
		// Evaluated: a line and column would count in the generated JSON.
		parse = scenario.ParseEvaluated
	}
	s, err := parse(data)
	var se *scenario.Error
	if errors.As(err, &se) {
		placeCUE(se, path)
		return nil, &scenarioError{se.In(path)}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// scenarioError is a scenario's problems, each a line at its place.
type scenarioError struct{ lines string }

func (e *scenarioError) Error() string { return e.lines }

// scenarioApart refuses a CUE scenario that is one of the policy's own
// files, as one in the policy's directory is: compiled into the policy, it
// would break it with errors that do not name the mistake.
func scenarioApart(policy, scenarioPath string) error {
	if filepath.Ext(scenarioPath) != ".cue" || strings.HasSuffix(policy, ".json") {
		return nil
	}
	files, err := dsl.ResolvePaths([]string{policy})
	if err != nil {
		return nil // loadPlan reports it
	}
	sc, err := filepath.Abs(scenarioPath)
	if err != nil {
		return nil
	}
	for _, f := range files {
		if abs, err := filepath.Abs(f); err == nil && abs == sc {
			return fmt.Errorf("%s: the scenario is a file of the policy (every .cue file in its directory is, but *_test.cue and names starting with _ or .): move it out of the directory, or name it _%s", scenarioPath, filepath.Base(scenarioPath))
		}
	}
	return nil
}

// placeCUE places the problems of the CUE scenario at path where the file
// writes what each names (its JSON form, which the problems were found in,
// has no lines of the file's); a JSON scenario's are placed already.
func placeCUE(se *scenario.Error, path string) {
	if filepath.Ext(path) != ".cue" {
		return
	}
	src, err := dsl.ReadFile(path, dsl.MaxFileSize)
	if err != nil {
		return
	}
	idx := dsl.IndexSource(path, src)
	se.Place(func(p string) (int, int, bool) {
		pos, ok := idx.At(nil, p)
		return pos.Line, pos.Col, ok
	})
}
