package main

import (
	"context"
	"strings"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/compiler/explain"
)

// cmdExplain prints each chain of a policy with why each layer sits where
// it does. Problems found on the way are printed on stderr; an explanation
// is printed whenever the policy loads, and the exit code is 1 when it has
// errors.
func cmdExplain(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "explain")
	format := fs.String("format", "text", "output `format`: "+strings.Join(explain.Formats, ", "))
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	switch *format {
	case "text", "dot", "mermaid":
	default:
		return fail(env, "explain: unknown format %q (want %s)", *format, strings.Join(explain.Formats, ", "))
	}
	schema, err := compiler.DefaultSchema()
	if err != nil {
		return fail(env, "%v", err)
	}
	c, err := compiler.Compile(ctx, fs.Args(), compiler.Options{Schema: schema, StopAfter: "check-order", Timeout: env.timeout})
	if err != nil {
		return fail(env, "%v", err)
	}
	ds := c.Diagnostics.Relative(env.wd).Sort()
	if err := printDiagnostics(env, ds, "text"); err != nil {
		return fail(env, "%v", err)
	}
	if c.Policy == nil || !contains(c.Stages, "compile-cel") {
		return exitProblems // the policy did not load
	}
	if err := explain.Write(env.stdout, explain.Build(c.Policy, schema.Constraints()), *format); err != nil {
		return fail(env, "%v", err)
	}
	if ds.HasErrors() {
		return exitProblems
	}
	return exitOK
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
