package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue/cuecontext"

	_ "github.com/agentc-dev/agentc/builtins/all" // the standard middlewares
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "run", "[-json] [-trace] POLICY SCENARIO")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	trace := fs.Bool("trace", false, "print the tracing layers' spans")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	p, code := loadPlan(ctx, env, fs.Arg(0))
	if p == nil {
		return code
	}
	sc, err := readScenario(fs.Arg(1))
	if err != nil {
		return fail(env, "%v", err)
	}
	res, err := scenario.Run(ctx, p, sc, scenario.Options{Trace: *trace})
	if err != nil {
		return fail(env, "run %s: %v", fs.Arg(1), err)
	}
	if *asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fail(env, "%v", err)
		}
		fmt.Fprintf(env.stdout, "%s\n", b)
		return exitOK
	}
	printResult(env.stdout, res)
	return exitOK
}

// loadPlan compiles the policy at path, or loads it when path is a plan
// (.json). It prints diagnostics and returns nil with the exit code on
// failure.
func loadPlan(ctx context.Context, env *cliEnv, path string) (*plan.Plan, int) {
	if strings.HasSuffix(path, ".json") {
		p, err := plan.Load(path)
		if err != nil {
			return nil, fail(env, "%v", err)
		}
		return p, exitOK
	}
	c, err := compiler.Compile(ctx, []string{path}, compiler.Options{})
	if err != nil {
		return nil, fail(env, "%v", err)
	}
	if err := printDiagnostics(env, c.Diagnostics.Relative(env.wd).Sort(), false); err != nil {
		return nil, fail(env, "%v", err)
	}
	if c.Plan == nil {
		return nil, exitProblems
	}
	return c.Plan, exitOK
}

// readScenario reads a scenario from a JSON or CUE file.
func readScenario(path string) (*scenario.Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if filepath.Ext(path) == ".cue" {
		v := cuecontext.New().CompileBytes(data)
		if err := v.Err(); err != nil {
			return nil, fmt.Errorf("scenario %s: %v", path, err)
		}
		if data, err = v.MarshalJSON(); err != nil {
			return nil, fmt.Errorf("scenario %s: %v", path, err)
		}
	}
	s, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// printResult writes a human-readable account of a run.
func printResult(w io.Writer, r *scenario.Result) {
	var steps func(indent string, ss []scenario.StepResult)
	steps = func(indent string, ss []scenario.StepResult) {
		for _, s := range ss {
			outcome := s.Outcome
			if outcome == "" {
				outcome = "ok"
			}
			fmt.Fprintf(w, "%sstep %d  %-5s  %-7s", indent, s.Index, s.Stage, outcome)
			if s.Model != "" {
				fmt.Fprintf(w, "  model=%s", s.Model)
			}
			if s.Attempts > 0 {
				fmt.Fprintf(w, "  attempts=%d", s.Attempts)
			}
			if s.Deduped != nil && *s.Deduped {
				fmt.Fprint(w, "  deduped")
			}
			if s.Text != nil {
				fmt.Fprintf(w, "  text=%q", *s.Text)
			}
			if s.Result != nil {
				b, _ := json.Marshal(s.Result)
				fmt.Fprintf(w, "  result=%s", b)
			}
			if s.Admitted != nil {
				fmt.Fprintf(w, "  admitted=%d", len(*s.Admitted))
			}
			if s.Output != nil {
				fmt.Fprintf(w, "  output=%q", *s.Output)
			}
			if s.Error != nil {
				fmt.Fprintf(w, "  %s", s.Error.Kind)
				if s.Error.Layer != "" {
					fmt.Fprintf(w, " in %s", s.Error.Layer)
				}
				fmt.Fprintf(w, ": %s", s.Error.Message)
			}
			fmt.Fprintln(w)
			steps(indent+"  ", s.Nested)
		}
	}
	steps("", r.Steps)
	fmt.Fprintf(w, "executions: models %s; tools %s\n", counts(r.Executions.Models), counts(r.Executions.Tools))
	for _, a := range r.Audit {
		who := a.Tool
		if who == "" {
			who = a.Stage
		}
		fmt.Fprintf(w, "audit: %s %s attempts=%d", who, a.Decision, a.Attempts)
		if a.ErrorMessage != "" {
			fmt.Fprintf(w, " (%s: %s)", a.ErrorType, a.ErrorMessage)
		}
		fmt.Fprintln(w)
	}
	m := r.Meter
	fmt.Fprintf(w, "meter: %d input tokens, %d output tokens, $%.6f, %d calls\n", m.InputTokens, m.OutputTokens, m.USD, m.Calls)
	for _, s := range r.Trace {
		fmt.Fprintf(w, "span: %s%s", strings.Repeat("  ", s.Depth), s.Name)
		if s.Status != "" {
			fmt.Fprintf(w, " [%s]", s.Status)
		}
		fmt.Fprintln(w)
	}
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
