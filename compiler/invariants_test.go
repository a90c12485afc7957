package compiler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

func TestInvariantsLowered(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: side_effecting: true
invariants: {
	off: ["budget_overshoot"]
	max_executions: refund: 2
	custom: one_refund: "executions.tools.refund <= 1"
}
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.NotNil(t, c.Plan, "%v", c.Diagnostics)
	assert.Equal(t, &plan.Invariants{
		Off:           []string{"budget_overshoot"},
		MaxExecutions: map[string]int{"refund": 2},
		Custom:        map[string]plan.Invariant{"one_refund": {Expr: "executions.tools.refund <= 1", Pos: "p.cue:7:22"}},
	}, c.Plan.Invariants)
}

func TestInvariantsCELChecked(t *testing.T) {
	dir := writePolicy(t, `package p

chains: turn: [{use: "audit"}]
invariants: custom: {
	syntax: "executions.tools.refund <= "
	typo:   "crashd || true"
	number: "size(steps) + 1"
	fine:   "size(audit) <= 2 && !crashed"
}
`)
	c, got := compileDiagnostics(t, dir, "", false)
	assert.Equal(t, []string{"5:38 cel/syntax", "6:11 cel/type", "7:11 cel/type"}, got, "%v", c.Diagnostics)
	assert.Nil(t, c.Plan)
}

// An invariant's reads are checked against the trace: a field the trace
// does not have, a model or tool the policy does not declare, a name or a
// stage compared with a value the trace never holds.
func TestInvariantsReadTheTrace(t *testing.T) {
	dir := writePolicy(t, `package p

models: primary: {}
tools: refund: side_effecting: true
chains: {chat: [{use: "meter"}], tool: [{use: "audit"}]}
invariants: custom: {
	field:    "executions.tool.refund <= 1"
	key:      "executions.tools.refnd <= 1"
	name:     "target.name != 'refnd' || size(audit) <= 1"
	in_keys:  "!('refnd' in executions.tools)"
	record:   "audit.all(a, a.tol != 'x')"
	tool:     "audit.exists(a, has(a.tool) && a.tool in ['refund', 'refnd'])"
	step:     "steps.all(s, !has(s.error) || s.error.knd != 'timeout')"
	stage:    "target.stage == 'turn' || meter.usd <= 1.0 && meter.cals <= 3"
	fine:     "target.name != 'refund' || executions.tools.refund <= 1 && executions.models['primary'] >= 0 && steps.all(s, (!has(s.outcome) || s.outcome != 'in_doubt') && (!has(s.steps) || s.steps.all(n, !has(n.attempts) || n.attempts <= 3))) && audit.all(a, has(a.tool) && a.tool == 'refund' && a.decision != 'failed')"
}
`)
	_, got := compileDiagnostics(t, dir, "", true)
	assert.Equal(t, []string{
		"7:24 cel/type: invariant: executions has no field 'tool' (its fields: models, retrievals, tools): the read fails on every run, and prove reports the invariant violated; did you mean 'tools'?",
		"8:30 cel/type: invariant: executions.tools has no key 'refnd': its keys are the declared tools (refund), so the read fails on every run, and prove reports the invariant violated; did you mean 'refund'?",
		"9:28 cel/unknown-value: invariant: target.name is never 'refnd': it is one of the declared models and tools ('primary', 'refund'; prove calls no other), so target.name != 'refnd' is always true; did you mean 'refund'?",
		"10:15 cel/unknown-value: invariant: 'refnd' in executions.tools is always false: its keys are the declared tools (refund); did you mean 'refund'?",
		"11:28 cel/type: invariant: audit[] has no field 'tol' (its fields: attempts, decision, error_message, error_type, grounding, layer, stage, tool): the read fails on every run, and prove reports the invariant violated; did you mean 'tool'?",
		"12:65 cel/unknown-value: invariant: audit[].tool is never 'refnd': it is one of the declared tools ('refund'; prove calls no other), so 'refnd' in the list never matches (its other values may); did you mean 'refund'?",
		"13:51 cel/type: invariant: steps[].error has no field 'knd' (its fields: kind, layer, message): the read fails on every run, and prove reports the invariant violated; did you mean 'kind'?",
		"14:29 cel/unknown-value: invariant: target.stage is never 'turn': it is one of the stages prove calls ('chat', 'tool'), so target.stage == 'turn' is always false: it can only make the invariant fail more runs, never fewer",
		"14:65 cel/type: invariant: meter has no field 'cals' (its fields: calls, input_tokens, output_tokens, usd): the read fails on every run, and prove reports the invariant violated; did you mean 'calls'?",
	}, got)
}

func TestInvariantsReadOmittedFields(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: side_effecting: true
invariants: custom: {
	select:  "steps.all(s, s.error.kind == 'x' && s.error.kind != 'crash')"
	index:   "audit.all(a, a['layer'] != 'refund')"
	first:   "size(steps) == 0 || steps[0].error.kind != 'timeout'"
	last:    "size(steps) == 0 || steps[size(steps) - 1].attempts <= 3"
	shadow:  "steps.all(s, has(s.error) && steps.all(s, s.error.kind == 'x'))"
	guarded: "steps.all(s, (has(s.error) ? s.error.kind == 'x' : true) && (!('error' in s) || s.error.kind != 'timeout'))"
	proved:  "steps.all(s, s.outcome == 'ok') && audit.all(a, a.tool != '')"
}
`)
	_, got := compileDiagnostics(t, dir, ruleUncheckedKey, true)
	fails := "fails, and prove reports the invariant violated (evaluation failed), unless the rest of the invariant decides it; test it first"
	warn := func(pos, path, read string) string {
		return pos + " cel/unchecked-key: invariant: the trace leaves " + path + " out where it is empty: where a record lacks it, reading " +
			read + " " + fails + ": has(" + read + ") && ... or !has(" + read + ") || ..."
	}
	// The step's outcome and the audit record's tool (proved) are written
	// by every run prove makes: no warning.
	assert.Equal(t, []string{
		warn("5:27", "steps[].error", "s.error"),
		warn("6:28", "audit[].layer", "a.layer"),
		warn("7:41", "steps[].error", "steps[0].error"),
		"8:55 cel/unchecked-key: invariant: the trace leaves steps[].attempts out where it is empty: where a record lacks it, reading it " + fails + " with has()",
		warn("9:56", "steps[].error", "s.error"),
	}, got)
}

// compileDiagnostics compiles the policy in dir and returns its
// diagnostics of the given rule (every rule when it is ""), each as
// "line:col rule", followed by ": message" when withMessage is set.
func compileDiagnostics(t *testing.T, dir, rule string, withMessage bool) (*Compilation, []string) {
	t.Helper()
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		if rule != "" && d.Rule != rule {
			continue
		}
		line := d.Pos.String()[len(d.Pos.File)+1:] + " " + d.Rule
		if withMessage {
			line += ": " + d.Message
		}
		got = append(got, line)
	}
	return c, got
}

// A turn guard that reads status alone and tests it against a status it
// never sees with != is always true: a deny blocks every turn and fails
// closed (warnings), a require never blocks (an error, cel/constant's). So
// does a deny that holds it beside other reads: it can only block more.
func TestTurnStatusInequalityFollowsOutcome(t *testing.T) {
	dir := writePolicy(t, `package p

chains: turn: [
	{use: "guard", name: "closed", phase: "after", deny: "status != ''"},
	{use: "guard", name: "open", phase: "after", require: "status != ''"},
	{use: "guard", name: "mixed", phase: "after", deny: "status != '' || run.meta.?tier.orValue('') == 'trial'"},
]
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		got = append(got, fmt.Sprintf("%d %s %s", d.Pos.Line, d.Severity, d.Rule))
	}
	assert.ElementsMatch(t, []string{
		"4 warning cel/unknown-value", "4 warning cel/constant",
		"5 warning cel/unknown-value", "5 error cel/constant",
		"6 warning cel/unknown-value",
	}, got)
}
