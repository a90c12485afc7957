package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/policytest"
)

func cmdTest(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "test")
	runRE := fs.String("run", "", "run only the cases whose name matches `REGEX`")
	verbose := fs.Bool("v", false, "print every case, and the run output of failures")
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
	passed, failed := 0, 0
	for _, paths := range policies {
		dir := paths[0]
		if len(paths) > 1 || filepath.Ext(dir) == ".cue" {
			dir = filepath.Dir(dir)
		}
		cases, err := policytest.Discover(ctx, dir, dsl.DataOptions{Timeout: env.timeout})
		if err != nil {
			return fail(env, "%v", err)
		}
		if len(cases) == 0 {
			fmt.Fprintf(env.stdout, "?     %s  [no test files]\n", rel(env, dir))
			continue
		}
		c, err := compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout})
		if err != nil {
			return fail(env, "%v", err)
		}
		var rules []string
		for _, d := range c.Diagnostics {
			rules = append(rules, d.Rule)
		}
		printedDiags := false
		for _, tc := range cases {
			if filter != nil && !filter.MatchString(tc.Name) {
				continue
			}
			var problem string
			if tc.WantVet != nil {
				problem = tc.CheckVet(rules)
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
					diff, out, err := tc.Run(ctx, c.Plan, dir)
					switch {
					case err != nil:
						problem = err.Error()
					case diff != "":
						problem = diff
						if *verbose {
							problem += "\n      output: " + string(out)
						}
					}
				}
			}
			if problem != "" {
				failed++
				fmt.Fprintf(env.stdout, "FAIL  %s  %s: %s\n", rel(env, tc.File), tc.Name, problem)
				continue
			}
			passed++
			if *verbose {
				fmt.Fprintf(env.stdout, "ok    %s  %s\n", rel(env, tc.File), tc.Name)
			}
		}
	}
	fmt.Fprintf(env.stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return exitProblems
	}
	return exitOK
}

func rel(env *cliEnv, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(env.wd, abs); err == nil {
		return r
	}
	return path
}
