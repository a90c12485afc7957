package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// FailOpen reports a checking layer set to let the call through when its
// own check fails.
var FailOpen = &Rule{
	Name:     "guard/fail-open",
	Severity: dsl.Warning,
	Doc: `a checking layer lets the call through when its check cannot be made.

A guarding layer whose on_error is "open" (guard, security, judge) passes the call unchecked when its own machinery
fails: a CEL evaluation error, a detector or classifier that times out or
is unreachable, a judge that gives no verdict. The policy reads as
enforcing and lets through exactly the calls it could not check. A
warning, so that agentc vet -strict refuses every fail-open switch: a CI
that must let nothing through by accident runs -strict. There is no
per-line suppression; a layer meant to fail open (a best-effort judge of
tone) is accepted by vetting that policy without -strict, where the
warning stays visible. settings.allow_undeclared_tools: true is reported
too: it lets a call of any tool the policy does not declare run, its
arguments unchecked. A tool-chain layer that can reach a side-effecting
tool is reported by guard/fail-open-side-effect instead. pii and
content_filter accept on_error but have no failure mode: a call they
cannot read is refused whatever it says, so "open" changes nothing, and
is reported here (in front of a side-effecting tool too) as a switch that
reads as failing open and does not.`,
	Run: func(p *Pass) {
		if p.Policy.AllowUndeclaredTools {
			p.Report(dsl.Diagnostic{Pos: p.Policy.AllowUndeclaredToolsPos, Message: "settings.allow_undeclared_tools: true lets a call of any tool the policy does not declare run, its arguments checked by no schema; declare the tools (or the mcp servers that serve them) and remove the setting"})
		}
		for _, stage := range dsl.Stages {
			for _, e := range p.Policy.Chains[stage] {
				if e.Kind == nil || !e.Kind.Has("guards") || stringField(e, "on_error") != "open" {
					continue
				}
				if noFailureMode(e.Use) {
					p.Report(dsl.Diagnostic{Pos: e.FieldPos("on_error"), Message: fmt.Sprintf("%s has on_error: \"open\", which changes nothing: it has no failure mode, and a call it cannot check is refused whatever on_error says, so it never fails open; remove on_error, which reads as if it did",
						e.Ref())})
					continue
				}
				if stage == "tool" {
					if bad, _ := p.sideEffectingReaching(e); len(bad) > 0 {
						continue // guard/fail-open-side-effect
					}
				}
				pos := e.FieldPos("on_error")
				how := ""
				if pos == e.Pos {
					pos, how = e.UsePos, fmt.Sprintf(" by default (the on_error of %s is \"open\" unless set)", e.Use)
				}
				p.Report(dsl.Diagnostic{Pos: pos, Message: fmt.Sprintf("%s fails open%s: when its check cannot be made (%s), the call goes through unchecked; set on_error: \"closed\" to block it instead",
					e.Ref(), how, failure(e.Use))})
			}
		}
	},
}

// noFailureMode reports whether the builtin use accepts on_error without
// acting on it: pii and content_filter match text, which cannot fail, and
// refuse a call they cannot read (arguments with no JSON form).
func noFailureMode(use string) bool {
	return use == "pii" || use == "content_filter"
}

// failure names what makes a layer's check fail, for messages.
func failure(use string) string {
	switch use {
	case "guard":
		return "an evaluation error, such as a missing field"
	case "judge":
		return "the judge model fails, times out or gives no verdict"
	case "security":
		return "its classifier fails or times out"
	}
	return "its detector fails"
}
