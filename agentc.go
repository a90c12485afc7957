// Package agentc is the one-line way to embed a policy: compile a policy
// directory and get a ready pipeline.
//
//	pipe, err := agentc.Load(ctx, "policies/support", runtime.Deps{Models: models, Tools: tools})
//
// A model the policy declares with a provider gets its client (Deps.Models
// entries win). Load links CUE, the compiler and the providers. A service
// that should not (small binary, fast start) ships the plan written by
// `agentc build` and calls plan.Load and runtime.Build instead, importing
// the providers it needs (github.com/agentc-dev/agentc/providers/all).
package agentc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	_ "github.com/agentc-dev/agentc/builtins/all" // the standard middlewares
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	_ "github.com/agentc-dev/agentc/providers/all" // the model providers (openai, anthropic)
	"github.com/agentc-dev/agentc/runtime"
)

// PolicyError is a policy that does not compile: it holds every diagnostic,
// errors and warnings.
type PolicyError struct {
	Diagnostics dsl.Diagnostics
}

// Error counts the errors and lists each with its position, as agentc vet
// prints them; the warnings are in Diagnostics only.
func (e *PolicyError) Error() string {
	var b strings.Builder
	errs, _ := e.Diagnostics.Count()
	fmt.Fprintf(&b, "policy has %d error(s):", errs)
	for _, d := range e.Diagnostics {
		if d.Severity == dsl.Error {
			b.WriteString("\n\t" + d.String())
		}
	}
	return b.String()
}

// Load compiles the policy at path (a directory or .cue files, as agentc
// vet takes them) and builds its pipeline with deps. When deps.Dir is empty
// the policy's relative paths resolve against its directory. A policy with
// errors returns a *PolicyError; warnings do not stop it, and Load does not
// return them (agentc vet prints them; compiler.Compile returns them with
// the plan): it logs each through deps.Logger, when one is given, as one
// line at level warn with its position ("pos", file:line:col), rule and
// message. The caller closes the pipeline.
func Load(ctx context.Context, path string, deps runtime.Deps) (*runtime.Pipeline, error) {
	c, err := compiler.Compile(ctx, []string{path}, compiler.Options{})
	if err != nil {
		return nil, err
	}
	if c.Plan == nil {
		return nil, &PolicyError{Diagnostics: c.Diagnostics}
	}
	if deps.Logger != nil {
		logWarnings(ctx, deps.Logger, c.Diagnostics)
	}
	if deps.Dir == "" && c.Policy != nil {
		deps.Dir = c.Policy.Dir
	}
	return runtime.Build(ctx, c.Plan, deps)
}

// logWarnings logs each warning of ds as one line: its related positions,
// if any, join in one attribute.
func logWarnings(ctx context.Context, log *slog.Logger, ds dsl.Diagnostics) {
	for _, d := range ds {
		if d.Severity != dsl.Warning {
			continue
		}
		attrs := []any{"pos", d.Pos.String(), "rule", d.Rule, "message", d.Message}
		if len(d.Related) > 0 {
			rel := make([]string, len(d.Related))
			for i, r := range d.Related {
				rel[i] = r.Pos.String() + ": " + r.Message
			}
			attrs = append(attrs, "related", strings.Join(rel, "; "))
		}
		log.WarnContext(ctx, "policy warning", attrs...)
	}
}
