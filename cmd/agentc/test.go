package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/policytest"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

func cmdTest(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "test")
	runRE := fs.String("run", "", "run only the cases whose name matches `REGEX`")
	verbose := fs.Bool("v", false, "print every case run, and with a failure what the case checked: the run's output, vet's diagnostics or prove's counterexamples")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	var filter *regexp.Regexp
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			return fail(env, "-run: %v", err)
		}
		filter = re
	}
	policies, err := expandPaths(fs.Args())
	if err != nil {
		return fail(env, "%v", err)
	}
	for _, paths := range policies {
		for _, f := range paths {
			if st, err := os.Stat(f); err == nil && !st.IsDir() && filepath.Ext(f) != ".cue" {
				// A compiled plan has no test cases: they live beside the
				// policy it was built from.
				return fail(env, "test %s: not a .cue file: agentc test takes the policy, whose test cases live beside it", f)
			}
		}
		// A directory without a policy is a wrong path, as for vet, not a
		// policy without tests.
		if _, err := dsl.ResolvePaths(paths); err != nil {
			return fail(env, "%v", err)
		}
	}
	// The tracing layers' spans of the cases' runs are exported as agentc
	// run exports them (a case that checks its spans apart:
	// policytest.Case.RunExported); its lines go to stderr.
	tp, flush, err := stderrTracing(ctx, env)
	if err != nil {
		return fail(env, "test: %v", err)
	}
	defer flush()
	passed, failed := 0, 0
	for _, paths := range policies {
		dir := paths[0]
		if len(paths) > 1 || filepath.Ext(dir) == ".cue" {
			dir = filepath.Dir(dir)
		}
		// A test file's problems, and those of every case that reads
		// (CheckIDs), are reported together: a file is fixed in one round.
		cases, readErr := policytest.Discover(ctx, dir, dsl.DataOptions{Timeout: env.timeout})
		if readErr == nil && len(cases) == 0 {
			fmt.Fprintf(env.stdout, "?     %s  [no test files]\n", rel(env, dir))
			continue
		}
		c, err := compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout})
		if err != nil {
			if readErr != nil {
				failEach(env, readErr)
			}
			return fail(env, "%v", err)
		}
		// A want no run can meet stops the run as a test file that does
		// not read does.
		if err := errors.Join(readErr, policytest.CheckIDs(cases, c)); err != nil {
			return failEach(env, err)
		}
		var rules []string
		for _, d := range c.Diagnostics {
			rules = append(rules, d.Rule)
		}
		printedDiags := false
		ub := &unbuilt{env: env, c: c}
		pr := &policyProver{paths: paths, dir: dir, vetted: c, results: map[int]*proveResult{}, unbuilt: ub}
		for _, tc := range cases {
			if filter != nil && !filter.MatchString(tc.Name) {
				continue
			}
			var problem, where string
			var runOut []byte
			if tc.WantVet != nil {
				problem, where = tc.CheckVet(rules), tc.At("want_vet")
				if problem != "" && *verbose {
					problem += "\n      diagnostics:" + diagnosticLines(env, c.Diagnostics)
				}
			}
			if problem == "" && tc.WantProve != nil {
				problem, where = pr.check(ctx, env, tc, *verbose), tc.At("want_prove")
			}
			if problem == "" && tc.Scenario != nil {
				if c.Plan == nil {
					if !printedDiags {
						printedDiags = true
						if err := printDiagnostics(env, c.Diagnostics.Relative(env.wd).Sort(), "text"); err != nil {
							return fail(env, "%v", err)
						}
					}
					problem = "the policy does not vet"
				} else {
					diff, out, err := tc.RunExported(ctx, c.Plan, dir, tp)
					runOut = out
					switch {
					case err != nil:
						problem = ub.problem(err)
						where = tc.Where(problem)
					case diff != "":
						problem, where = placeDifferences(env, tc, diff)
						if *verbose {
							problem += "\n      output: " + string(out)
						}
					}
				}
			}
			if problem != "" {
				failed++
				// At the place the problem names in the test file.
				fmt.Fprintf(env.stdout, "FAIL  %s  %s: %s\n", rel(env, cmp.Or(where, tc.At(""))), tc.Name, problem)
				continue
			}
			passed++
			if *verbose {
				fmt.Fprintf(env.stdout, "ok    %s  %s\n", rel(env, tc.File), tc.Name)
				printUnused(env, tc, runOut)
			}
		}
	}
	fmt.Fprintf(env.stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return exitProblems
	}
	if filter != nil && passed == 0 {
		// A filter that matches nothing checks nothing: in CI a misspelt
		// -run would pass every time.
		fmt.Fprintf(env.stderr, "agentc test: no test case matches -run %q\n", *runRE)
		return exitProblems
	}
	if passed == 0 {
		// Nor is a run that found no case at all a pass: a test file
		// moved or misnamed (refund_tests.cue) would pass every time.
		fmt.Fprintf(env.stderr, "agentc test: no test case found: nothing was checked (cases live in *_test.cue files and under tests/)\n")
		return exitProblems
	}
	return exitOK
}

// placeDifferences orders the differences of a case's run (one a line) by
// their places in its test file, and returns the first with its place and
// each other on an indented line of its own after it, at its place.
func placeDifferences(env *cliEnv, tc *policytest.Case, diff string) (problem, where string) {
	type placed struct{ text, where string }
	var ds []placed
	for _, d := range strings.Split(diff, "\n") {
		ds = append(ds, placed{d, tc.Where(d)})
	}
	// file:line:col, compared by line and column (a difference the file
	// does not place, at the case, sorts as it comes).
	lineCol := func(w string) (int, int) {
		m := lineColRE.FindStringSubmatch(w)
		if m == nil {
			return 0, 0
		}
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		return line, col
	}
	slices.SortStableFunc(ds, func(a, b placed) int {
		al, ac := lineCol(a.where)
		bl, bc := lineCol(b.where)
		return cmp.Or(cmp.Compare(al, bl), cmp.Compare(ac, bc))
	})
	var b strings.Builder
	b.WriteString(ds[0].text)
	for _, d := range ds[1:] {
		fmt.Fprintf(&b, "\n      %s  %s", rel(env, cmp.Or(d.where, tc.At(""))), d.text)
	}
	return b.String(), ds[0].where
}

// lineColRE is the line and column that end a place, file:line:col.
var lineColRE = regexp.MustCompile(`:(\d+):(\d+)$`)

// diagnosticLines lists the diagnostics of a policy, one indented line
// each, positions relative to the working directory (" none" when there
// are none).
func diagnosticLines(env *cliEnv, ds dsl.Diagnostics) string {
	if len(ds) == 0 {
		return " none"
	}
	var b strings.Builder
	for _, d := range ds.Relative(env.wd).Sort() {
		b.WriteString("\n        " + d.String())
	}
	return b.String()
}

// rel returns path relative to the working directory when it lies below
// it, else path as given.
func rel(env *cliEnv, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(env.wd, abs); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return r
	}
	return path
}

// policyProver explores a policy for its want_prove cases, once per depth.
type policyProver struct {
	paths   []string
	dir     string
	vetted  *compiler.Compilation
	plan    *plan.Plan
	loadErr string
	results map[int]*proveResult
	unbuilt *unbuilt
}

// unbuilt reports, once per policy, a layer of the policy compiled in c
// that does not build on this machine (a file_check root that is not
// there): every case that builds the pipeline fails the same way.
type unbuilt struct {
	env     *cliEnv
	c       *compiler.Compilation
	printed bool
}

// problem returns what a case that failed with err says: a layer that does
// not build is reported on standard error the first time, and the case
// points there.
func (u *unbuilt) problem(err error) string {
	le := (*runtime.LayerError)(nil)
	if !errors.As(err, &le) {
		return err.Error()
	}
	if !u.printed {
		u.printed = true
		fmt.Fprintf(u.env.stderr, "%s: the policy does not build on this machine: %v\n", cmp.Or(layerPlace(u.env, u.c, le), "agentc test"), le)
	}
	return "the policy does not build on this machine (see above)"
}

type proveResult struct {
	ids        []string
	violations []*prove.Counterexample
	unexplored []prove.Unexplored
	err        error
}

// check explores the policy at the case's depth and compares the
// invariants found violated with the case's set.
func (pp *policyProver) check(ctx context.Context, env *cliEnv, tc *policytest.Case, verbose bool) string {
	if pp.plan == nil && pp.loadErr == "" {
		pp.plan = pp.vetted.Plan
		if pp.plan == nil {
			// A policy that vet refuses is explored all the same.
			c, err := compiler.Compile(ctx, pp.paths, compiler.Options{Timeout: env.timeout, NoOrderCheck: true})
			switch {
			case err != nil:
				pp.loadErr = err.Error()
			case c.Plan == nil:
				pp.loadErr = "the policy does not compile"
			default:
				pp.plan = c.Plan
			}
		}
	}
	if pp.loadErr != "" {
		return pp.loadErr
	}
	r := pp.results[tc.ProveK]
	if r == nil {
		r = &proveResult{}
		r.ids, r.violations, r.unexplored, r.err = policytest.Prove(ctx, pp.plan, pp.dir, tc.ProveK)
		pp.results[tc.ProveK] = r
	}
	if r.err != nil {
		return pp.unbuilt.problem(r.err)
	}
	problem := tc.CheckProve(r.ids)
	if problem == "" {
		return ""
	}
	problem += fmt.Sprintf(" (at k=%d)", tc.ProveK)
	if !slices.Contains(tc.WantProve, policytest.NotExplored) {
		for _, u := range r.unexplored {
			problem += fmt.Sprintf("\n      %s: %s: %s", policytest.NotExplored, u.Target, u.Reason)
		}
	}
	for _, v := range r.violations {
		if !slices.Contains(tc.WantProve, v.Invariant) {
			problem += fmt.Sprintf("\n      %s: %s (%s; script %s)", v.Invariant, v.Message, v.Target, strings.Join(v.Script, ", "))
			if verbose {
				var b strings.Builder
				_ = v.WriteText(&b)
				problem += "\n" + indent(b.String(), "      ")
			}
		}
	}
	return problem
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// printUnused lists under a case the script items its run left, from the
// run's JSON output, each at the first item no call took in the test file:
// a warning, as a case may script a call the policy refuses.
func printUnused(env *cliEnv, tc *policytest.Case, out []byte) {
	var res struct {
		Unused []scenario.Unused `json:"unused"`
	}
	if json.Unmarshal(out, &res) != nil {
		return
	}
	for _, u := range res.Unused {
		at := tc.At(fmt.Sprintf("scenario.%s[%d]", u.Script, u.Taken))
		fmt.Fprintf(env.stdout, "      warning: %s: %s\n", rel(env, at), u)
	}
}

// failEach reports each error err joins (every faulty case of the test
// files) as fail does, one to a line.
func failEach(env *cliEnv, err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			failEach(env, e)
		}
		return exitUsage
	}
	return fail(env, "%v", err)
}
