package prove_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// explorePolicy writes src as a policy and explores it at depth k.
func explorePolicy(t *testing.T, src string, k int) *prove.Report {
	t.Helper()
	p, dir := policyPlan(t, src)
	return exploreP(t, p, dir, k)
}

// exploreP explores p, whose directory is dir, at depth k.
func exploreP(t *testing.T, p *plan.Plan, dir string, k int) *prove.Report {
	t.Helper()
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: k, Dir: dir})
	require.NoError(t, err)
	require.Positive(t, r.Targets)
	return r
}

// policyPlan writes src as a policy and compiles it (its layer order
// unchecked); it returns the plan and the policy's directory.
func policyPlan(t *testing.T, src string) (*plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package p\n\n"+src), 0o644))
	comp, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{NoOrderCheck: true})
	require.NoError(t, err)
	require.NotNil(t, comp.Plan, "%v", comp.Diagnostics)
	return comp.Plan, dir
}

func violated(r *prove.Report) []string {
	var out []string
	for _, v := range r.Violations {
		var b strings.Builder
		_ = v.WriteText(&b)
		out = append(out, b.String())
	}
	return out
}

const refundTool = `tools: refund: {side_effecting: true, args: {type: "object", required: ["order_id"], properties: order_id: type: "string"}}
`

// An idempotent layer in front of a tool that is not retry_safe is the fix
// vet proposes for a retry around it. A caller that sends the call again
// after it failed with a 503 makes a new logical call, as it does without
// the layer: the policy proves clean, as the same policy without
// idempotent does.
func TestMaxExecutionsIdempotentCallerResend(t *testing.T) {
	r := explorePolicy(t, refundTool+`chains: tool: [{use: "audit"}, {use: "idempotent"}]`, 3)
	assert.Empty(t, violated(r))
	r = explorePolicy(t, refundTool+`chains: tool: [{use: "audit"}]`, 3)
	assert.Empty(t, violated(r))
}

// Idempotent inside a retry still repeats the effect within one call.
// A retry around a side-effecting tool that is not retry_safe (which vet
// refuses) does not run it again after a failure that may have come after
// its effect: the refund runs at most once per logical call.
func TestMaxExecutionsIdempotentInsideRetry(t *testing.T) {
	r := explorePolicy(t, refundTool+`chains: tool: [{use: "retry", max_attempts: 3, initial_delay: "10ms"}, {use: "idempotent"}]`, 2)
	assert.Empty(t, r.Violations)
}

const payTool = `tools: pay: {side_effecting: true, args: {type: "object", required: ["amount"], properties: amount: {type: "number", minimum: 0, maximum: 1000}}}
`

// An idempotent layer with a when makes calls one logical call only where
// its when holds, as the runtime decides it: two payments that its when
// leaves alone are two logical calls, each run once, and the policy proves
// clean, as it does without the layer.
func TestMaxExecutionsIdempotentWhen(t *testing.T) {
	for _, when := range []string{"args.amount > 10.0", "args.amount < 0.0", "args.amount >= 0.0"} {
		r := explorePolicy(t, payTool+`chains: tool: [{use: "audit"}, {use: "idempotent", tools: ["pay"], when: "`+when+`"}]`, 2)
		assert.Empty(t, violated(r), "when: %s", when)
	}
}

// Where an idempotent layer's when holds for every call, prove counts the
// executions as it does for the layer without one: a retry inside it runs
// a retry_safe tool past its bound, the same counterexamples either way.
func TestMaxExecutionsIdempotentWhenHolds(t *testing.T) {
	const retrySafePay = `tools: pay: {side_effecting: true, retry_safe: true, args: {type: "object", required: ["amount"], properties: amount: {type: "number", minimum: 0, maximum: 1000}}}
invariants: max_executions: pay: 1
`
	without := violated(explorePolicy(t, retrySafePay+`chains: tool: [{use: "idempotent"}, {use: "retry", max_attempts: 2, initial_delay: "10ms"}]`, 2))
	require.NotEmpty(t, without)
	with := violated(explorePolicy(t, retrySafePay+`chains: tool: [{use: "idempotent", when: "args.amount >= 0.0"}, {use: "retry", max_attempts: 2, initial_delay: "10ms"}]`, 2))
	assert.Equal(t, without, with)
}

// A hedge outside a meter admits each racer on its own: the budget is
// passed by more than one call. The counterexample replays under agentc
// run (scenario.Run of the plan, without prove's probes) with the same
// ledger: a racer cancelled after it went out is charged the runtime's
// estimate of its input, which must be what the exploration billed.
func TestBudgetOvershootReplaysWithoutProbes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package p

models: {primary: {usd_per_mtok_in: 2.5, usd_per_mtok_out: 10}, backup: {usd_per_mtok_in: 2.5, usd_per_mtok_out: 10}}
chains: chat: [
	{use: "hedge", models: ["primary", "backup"], delay: "100ms"},
	{use: "meter", budget: usd: 0.001},
]
`), 0o644))
	p := compile(t, dir)
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: 3, Dir: dir})
	require.NoError(t, err)
	require.NotEmpty(t, r.Violations)
	v := r.Violations[0]
	require.Equal(t, prove.BudgetOvershoot, v.Invariant)
	res, err := scenario.Run(context.Background(), p, v.Scenario, scenario.Options{Dir: dir})
	require.NoError(t, err)
	assert.Greater(t, res.Meter.USD, 0.001+0.0004, "agentc run shows the overshoot: %+v\n%s", res.Meter, strings.Join(v.Trace, "\n"))
}

// A judge inside a meter sends its own verdict calls below the meter,
// which never charges them (vet refuses the order, order/judge-before-meter,
// but prove explores it): the providers bill every call while the ledger
// grows by the responses only, and the spend passes the budget by more than
// one call. Nothing is cancelled; the bill is compared all the same. The
// counterexample replays, and under the order vet asks for (the judge
// outside the meter, which charges the verdicts) the policy proves clean.
func TestBudgetOvershootJudgeInsideMeter(t *testing.T) {
	const models = `models: primary: {provider: "anthropic", model: "claude-sonnet-4-5", api_key_env: "K", usd_per_mtok_in: 3.0, usd_per_mtok_out: 15.0}
`
	p, dir := policyPlan(t, models+`chains: chat: [{use: "meter", budget: {usd: 0.01}}, {use: "judge", model: "primary", prompt: "allow or block"}]`)
	r, err := prove.Explore(context.Background(), p, prove.Options{Depth: 4, Dir: dir})
	require.NoError(t, err)
	var found *prove.Counterexample
	for _, v := range r.Violations {
		if v.Invariant == prove.BudgetOvershoot {
			found = v
		}
	}
	require.NotNil(t, found, "violations: %v", violated(r))
	assert.Contains(t, found.Message, "billed")
	ids, err := prove.Replay(context.Background(), p, found.Scenario, prove.Options{Dir: dir})
	require.NoError(t, err)
	assert.Contains(t, ids, prove.BudgetOvershoot)
	res, err := scenario.Run(context.Background(), p, found.Scenario, scenario.Options{Dir: dir})
	require.NoError(t, err)
	assert.Greater(t, res.Executions.Models["primary"], int(res.Meter.Calls), "the verdict calls ran uncharged")

	r = explorePolicy(t, models+`chains: chat: [{use: "judge", model: "primary", prompt: "allow or block"}, {use: "meter", budget: {usd: 0.01}}]`, 4)
	assert.Empty(t, violated(r))
}

// A meter with `when` bounds the calls it applies to, and what is spent for
// them: a judge inside it spends past its budget for those calls, and for
// the calls the meter leaves alone it bounds nothing.
func TestBudgetOvershootJudgeInsideScopedMeter(t *testing.T) {
	r := explorePolicy(t, `models: {
	primary: {usd_per_mtok_in: 3.0, usd_per_mtok_out: 15.0}
	backup: {usd_per_mtok_in: 3.0, usd_per_mtok_out: 15.0}
}
chains: chat: [
	{use: "meter", budget: {usd: 0.01}, when: "request.model == 'primary'"},
	{use: "judge", model: "backup", prompt: "allow or block"},
]`, 4)
	var targets []string
	for _, v := range r.Violations {
		if v.Invariant == prove.BudgetOvershoot {
			targets = append(targets, v.Target)
		}
	}
	assert.Equal(t, []string{"chat primary"}, targets, "violations: %v", violated(r))
}

// A meter with a window starts afresh at each window: over a run that
// waits past one (a retry after a rate limit), the providers bill more than
// one call over the ceiling while each window stays within it. The policy
// proves clean.
func TestBudgetOvershootWindowStartsAfresh(t *testing.T) {
	r := explorePolicy(t, `models: primary: {usd_per_mtok_in: 3, usd_per_mtok_out: 15}
chains: chat: [{use: "meter", budget: usd: 0.01, window: "1s"}, {use: "retry", max_attempts: 2, initial_delay: "1s"}]`, 5)
	assert.Empty(t, violated(r))
}

// A custom invariant reads executions as the runs of each fake: a retry
// that finds the script exhausted after a transient failure ran the tool
// once, as max_executions counts it; a script of two items, both taken,
// ran it twice.
func TestCustomInvariantCountsRunsNotCalls(t *testing.T) {
	const src = `tools: file_read: {args: {type: "object", required: ["path"], properties: path: {type: "string", maxLength: 64}}}
chains: tool: [{use: "audit", trail: "logical"}, {use: "retry", max_attempts: 3}]
invariants: custom: one_read: "target.name != 'file_read' || executions.tools.file_read <= 1"
`
	r := explorePolicy(t, src, 1)
	assert.Empty(t, violated(r))
	r = explorePolicy(t, src, 2)
	require.Len(t, r.Violations, 1)
	assert.Equal(t, "one_read", r.Violations[0].Invariant)
	assert.Len(t, r.Violations[0].Script, 2)
}

// A custom invariant's violation names its place with the policy's
// directory, as vet and the rest of the command line name a position:
// `prove examples/...` tells which policy's file it is.
func TestCustomInvariantViolationNamesThePolicyDirectory(t *testing.T) {
	p, dir := policyPlan(t, `tools: pay: {side_effecting: true, args: {type: "object", properties: id: {type: "string", maxLength: 8}}}
invariants: custom: never: "executions.tools.pay <= 0"
`)
	r := exploreP(t, p, dir, 1)
	require.NotEmpty(t, r.Violations)
	assert.Equal(t, "never", r.Violations[0].Invariant)
	assert.True(t, strings.HasPrefix(r.Violations[0].Message, filepath.Join(dir, "policy.cue")+":4:"), r.Violations[0].Message)
}
