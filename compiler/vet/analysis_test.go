package vet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

// analyze loads a one-file policy and analyses it.
func analyze(t *testing.T, src string) *vet.Analysis {
	t.Helper()
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644))
	p, diags, err := dsl.Load(context.Background(), []string{dir}, dsl.Options{Schema: schema})
	require.NoError(t, err)
	require.False(t, diags.HasErrors(), "%v", diags)
	return vet.Analyze(p, schema.Constraints())
}

func TestReach(t *testing.T) {
	a := analyze(t, `package p
tools: {
	refund: {side_effecting: true}
	search: {}
	fetch: {url_arg: "url"}
	drop: {side_effecting: true}
}
chains: tool: [
	{use: "tool_policy", deny: ["drop"]},
	{use: "guard", name: "no_fetch", deny: "tool.url_arg != ''"},
	{use: "guard", name: "big", deny: "args.amount > 100"},
	{use: "retry", when: "tool.side_effecting"},
	{use: "memoize", tools: ["search"]},
]
`)
	chain := a.Policy.Chains["tool"]
	retry, memo, big := chain[3], chain[4], chain[2]

	assert.Equal(t, "tool_policy", a.Blocker("drop").Name, "a deny list refuses the tool outright")
	assert.Equal(t, "no_fetch", a.Blocker("fetch").Name, "a deny that is true for every call of the tool")
	assert.Nil(t, a.Blocker("refund"), "a deny that depends on the arguments refuses nothing outright")

	assert.True(t, a.Applies(retry, "refund"))
	assert.False(t, a.Applies(retry, "search"), "when is statically false for a read-only tool")
	assert.True(t, a.Applies(retry, "drop"))
	assert.False(t, a.Reaches(retry, "drop"), "drop is refused before it reaches the retry")
	assert.True(t, a.Applies(retry, ""), "nothing is known about an undeclared tool")
	assert.False(t, a.Applies(memo, ""), "a scoped entry never sees an undeclared tool")

	var names []string
	for _, tool := range a.ToolsReaching(retry) {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"refund"}, names)
	assert.False(t, a.Overlap(retry, memo))
	assert.True(t, a.Overlap(big, memo))
	assert.Equal(t, 3, vet.Attempts(retry))
}

func TestConstraintWhen(t *testing.T) {
	a := analyze(t, `package p
chains: tool: [
	{use: "rate_limit", name: "r1", rate: 1, mode: "reject"},
	{use: "rate_limit", name: "r2", rate: 1, mode: "wait"},
	{use: "meter"},
]
constraints: [
	{id: "rejects-metered", outer: "meter", inner: "rate_limit", when: "inner.mode == 'reject'", why: "w"},
	{id: "bad-when", outer: "meter", inner: "rate_limit", when: "inner.mode ==", why: "w"},
	{id: "not-bool", outer: "meter", inner: "rate_limit", when: "1 + 2", why: "w"},
	{id: "missing-key", outer: "meter", inner: "rate_limit", when: "inner.store == 'redis'", why: "w"},
]
`)
	var rejects, missing []*vet.Pair
	for _, p := range a.Pairs {
		switch p.Constraint.ID {
		case "rejects-metered":
			rejects = append(rejects, p)
		case "missing-key":
			missing = append(missing, p)
		}
	}
	require.Len(t, rejects, 1, "when keeps only the rejecting limit")
	assert.Equal(t, "r1", rejects[0].Inner.Name)
	assert.False(t, rejects[0].Holds)
	require.Len(t, missing, 2, "a when that cannot be evaluated is checked")
	assert.Error(t, missing[0].WhenErr)

	rules := map[string]bool{}
	for _, d := range a.Problems {
		rules[d.Rule] = true
		assert.Equal(t, dsl.Error, d.Severity)
	}
	assert.True(t, rules["cel/syntax"], "%v", a.Problems)
	assert.True(t, rules["cel/not-bool"], "%v", a.Problems)
	for _, p := range a.Pairs {
		assert.NotEqual(t, "bad-when", p.Constraint.ID, "a constraint whose when does not compile is not applied")
	}
}

// A constraint's when is type-checked against the config types of the
// kinds its outer and inner designate.
func TestConstraintWhenTypes(t *testing.T) {
	tests := []struct {
		name, outer, inner, when string
		want                     string // the problem's message, "" for none
		col                      int
	}{
		{name: "typo", outer: "audit", inner: "retry", when: "outer.trial == 'logical'", want: "constraint x: when: undefined field 'trial'; did you mean 'trail'?", col: 70},
		{name: "typo inner", outer: "audit", inner: "retry", when: "outer.trail == 'logical' && inner.max_atempts > 2", want: "undefined field 'max_atempts'; did you mean 'max_attempts'?"},
		{name: "no close field", outer: "audit", inner: "retry", when: "outer.zzzzzz", want: "undefined field 'zzzzzz'"},
		{name: "wrong type", outer: "audit", inner: "retry", when: "inner.max_attempts == 'three'", want: "no matching overload for '_==_' applied to '(int, string)'"},
		{name: "numbers compare across types", outer: "audit", inner: "retry", when: "inner.max_attempts > 2.5 && inner.multiplier >= 2"},
		{name: "optional field tested", outer: "audit", inner: "retry", when: "has(outer.sink) && outer.sink == 'db'"},
		{name: "struct field", outer: "audit", inner: "retry", when: "has(inner.breaker.threshold)"},
		{name: "entry name", outer: "a1", inner: "retry", when: "outer.trail == 'logical'"},
		{name: "entry name typo", outer: "a1", inner: "retry", when: "outer.trial == 'logical'", want: "did you mean 'trail'?"},
		{name: "entry named after another id", outer: "log", inner: "retry", when: "outer.trail == 'logical'"},
		{name: "field of neither kind", outer: "log", inner: "retry", when: "outer.trial == 'logical'", want: "undefined field 'trial'"},
		{name: "key in a config", outer: "audit", inner: "retry", when: "'max_attempts' in inner && inner.max_attempts > 2"},
		{name: "index of a config", outer: "audit", inner: "retry", when: "inner['max_attempts'] > 2"},
		{name: "size of a config", outer: "audit", inner: "retry", when: "size(outer) > 0"},
		{name: "map idiom and a typo", outer: "audit", inner: "retry", when: "'x' in inner && outer.trial == 'logical'", want: "undefined field 'trial'; did you mean 'trail'?"},
		{name: "in over a field of the wrong type", outer: "audit", inner: "retry", when: "'x' in inner.max_attempts", want: "no matching overload for '@in' applied to '(string, int)'"},
		{name: "entry field", outer: "audit", inner: "retry", when: "inner.name == 'retry'", want: "undefined field 'name': name is the entry's, not part of the config of retry ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := analyze(t, `package p
tools: t: {}
chains: tool: [{use: "audit", name: "a1"}, {use: "retry"}, {use: "audit", name: "log"}]
constraints: [{id: "x", outer: "`+tt.outer+`", inner: "`+tt.inner+`", when: "`+tt.when+`", why: "w"}]
`)
			if tt.want == "" {
				assert.Empty(t, a.Problems)
				return
			}
			require.Len(t, a.Problems, 1, "%v", a.Problems)
			d := a.Problems[0]
			assert.Equal(t, "cel/type", d.Rule, "%s", d)
			assert.Contains(t, d.Message, tt.want, "%s", d)
			assert.Equal(t, 4, d.Pos.Line, "%s", d)
			if tt.col != 0 {
				assert.Equal(t, tt.col, d.Pos.Col, "%s", d)
			}
		})
	}
}

// A custom middleware's constraint is checked against the config types of
// its schema.
func TestCustomConstraintWhenTypes(t *testing.T) {
	schema, err := dsl.NewSchema([]dsl.CustomKind{{
		ID: "scorer", Stages: []string{"chat"}, Doc: "d", Schema: `threshold: *0.5 | number, label?: string, mode: *"strict" | "lenient"`,
		Constraints: []*dsl.Constraint{
			{ID: "ok", Outer: "scorer", Inner: "retry", When: &dsl.Expr{Source: "has(outer.label) && outer.threshold > 0.2 && outer.mode == 'lenient'"}, Why: "w"},
			{ID: "typo", Outer: "scorer", Inner: "retry", When: &dsl.Expr{Source: "outer.treshold > 0.2"}, Why: "w"},
			{ID: "value", Outer: "scorer", Inner: "retry", When: &dsl.Expr{Source: "outer.mode == 'lenent'"}, Why: "w"},
		},
	}})
	require.NoError(t, err)
	var got []string
	for _, c := range schema.Constraints() {
		if c.Module == "" {
			continue
		}
		if d := vet.WhenProblem(c); d != nil {
			got = append(got, c.ID+": "+d.Message)
		}
	}
	assert.Equal(t, []string{
		"typo: constraint typo: when: undefined field 'treshold'; did you mean 'threshold'?",
		"value: constraint value: when: outer.mode is never 'lenent': the schema of scorer allows 'lenient' or 'strict' only, so outer.mode == 'lenent' is always false, and the constraint may never apply; did you mean 'lenient'?",
	}, got)

	// A schema that is not one struct leaves the config untyped: the
	// condition is checked as before, without field names.
	schema, err = dsl.NewSchema([]dsl.CustomKind{{
		ID: "either", Stages: []string{"chat"}, Doc: "d", Schema: `{a: int} | {b: string}`,
		Constraints: []*dsl.Constraint{
			{ID: "any-field", Outer: "either", Inner: "retry", When: &dsl.Expr{Source: "outer.c == 1"}, Why: "w"},
		},
	}})
	require.NoError(t, err)
	for _, c := range schema.Constraints() {
		if c.Module != "" {
			assert.Nil(t, vet.WhenProblem(c), "constraint %s", c.ID)
		}
	}
}

func TestCycleSuppressesViolations(t *testing.T) {
	a := analyze(t, `package p
tools: t: {}
chains: tool: [{use: "audit"}, {use: "pii"}, {use: "log"}]
constraints: [
	{id: "a", outer: "pii", inner: "audit", why: "w"},
	{id: "b", outer: "log", inner: "pii", why: "w"},
	{id: "c", outer: "audit", inner: "log", why: "w"},
]
`)
	require.Len(t, a.Cycles, 1)
	cy := a.Cycles[0]
	assert.Len(t, cy.Constraints, 3)
	assert.Equal(t, cy.Path[0], cy.Path[len(cy.Path)-1])
	r := cy.Rotate(1)
	assert.Equal(t, cy.Constraints[1], r.Constraints[0])
	assert.Equal(t, cy.Path[1], r.Path[0])
	assert.Equal(t, r.Path[0], r.Path[3])
	for _, p := range a.Pairs {
		assert.False(t, p.Violated(), "a constraint in a cycle is reported as the cycle only")
	}
	ds := vet.Run(a, vet.Suite...)
	require.Len(t, ds, 1, "%v", ds)
	assert.Equal(t, "order/cycle", ds[0].Rule)
	assert.Len(t, ds[0].Related, 2, "every other constraint of the cycle is positioned")
}

func TestOneDiagnosticPerMisplacedLayer(t *testing.T) {
	a := analyze(t, `package p
chains: chat: [
	{use: "output_coerce", schema: {type: "object"}},
	{use: "retry", name: "again"},
	{use: "retry"},
]
`)
	ds := vet.Run(a, vet.CoerceOutsideRetry)
	require.Len(t, ds, 1, "%v", ds)
	require.Len(t, ds[0].Related, 2)
	assert.Equal(t, 4, ds[0].Related[0].Pos.Line)
	assert.Equal(t, 5, ds[0].Related[1].Pos.Line)
}

func TestConstraintWhenLimits(t *testing.T) {
	list := make([]string, 200)
	for i := range list {
		list[i] = strconv.Itoa(i)
	}
	l := "[" + strings.Join(list, ",") + "]"
	nested := l + ".all(a, " + l + ".all(b, " + l + ".all(c, " + l + ".all(d, a+b+c+d >= 0))))"
	tests := []struct {
		name, when string
		rule       string
		line, col  int // of the diagnostic; the when string opens at column 31
	}{
		{name: "type error", when: `'é' == 'é' && zzz`, rule: "cel/type", line: 3, col: 48},
		{name: "syntax error", when: `true && (`, rule: "cel/syntax", line: 3, col: 41},
		{name: "second line", when: `true &&\n zzz`, rule: "cel/type", line: 3, col: 42},
		{name: "not bool", when: `1 + 2`, rule: "cel/not-bool", line: 3, col: 32},
		{name: "literal iterations", when: nested, rule: "cel/cost", line: 3, col: 32},
		{name: "config iterations", when: `inner.a.all(a, inner.a.all(b, inner.a.all(c, inner.a.all(d, a+b+c+d >= 0))))`, rule: "cel/cost", line: 3, col: 32},
		{name: "too long", when: strings.Repeat("true && ", 600) + "true", rule: "cel/syntax", line: 3, col: 32},
		{name: "too deep", when: strings.Repeat("(", 100) + "true" + strings.Repeat(")", 100), rule: "cel/syntax", line: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan *vet.Analysis, 1)
			go func() {
				done <- analyze(t, "package p\nchains: turn: [{use: \"audit\"}, {use: \"log\"}]\nconstraints: [{id: \"x\", when: \""+tt.when+"\", outer: \"log\", inner: \"audit\", why: \"w\"}]\n")
			}()
			var a *vet.Analysis
			select {
			case a = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("analysis does not end")
			}
			require.Len(t, a.Problems, 1, "%v", a.Problems)
			d := a.Problems[0]
			assert.Equal(t, tt.rule, d.Rule, "%s", d)
			assert.Equal(t, tt.line, d.Pos.Line, "%s", d)
			if tt.col != 0 {
				assert.Equal(t, tt.col, d.Pos.Col, "%s", d)
			}
			assert.NotContains(t, d.Message, "container", "%s", d)
			assert.Empty(t, a.Pairs, "a constraint whose when does not compile is not applied")
		})
	}
}

// TestBuiltinConstraintWhens checks the builtins' constraint conditions,
// which Analyze compiles only when a pair needs them.
func TestBuiltinConstraintWhens(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	n := 0
	for _, c := range schema.Constraints() {
		if c.When == nil {
			continue
		}
		n++
		assert.Nil(t, vet.WhenProblem(c), "constraint %s: when %q", c.ID, c.When.Source)
	}
	assert.NotZero(t, n)
}

// A hedge started too late for the retry outside it is reported at its
// delay, with the retry's attempt_timeout as the related position.
func TestInertHedgePositions(t *testing.T) {
	a := analyze(t, `package p
models: {primary: {}, backup: {}}
chains: chat: [
	{use: "retry", attempt_timeout: "500ms"},
	{use: "hedge", models: ["primary", "backup"], delay: "1s"},
]
`)
	ds := vet.Run(a, vet.Inert)
	require.Len(t, ds, 1, "%v", ds)
	assert.Equal(t, dsl.Warning, ds[0].Severity)
	assert.Equal(t, [2]int{5, 55}, [2]int{ds[0].Pos.Line, ds[0].Pos.Col})
	require.Len(t, ds[0].Related, 1)
	assert.Equal(t, [2]int{4, 34}, [2]int{ds[0].Related[0].Pos.Line, ds[0].Related[0].Pos.Col})
}

// A key_args or arg_patterns entry naming an argument its tools do not
// declare gets the closest argument they do as its did-you-mean.
func TestInertArgNamesSuggest(t *testing.T) {
	a := analyze(t, `package p
stores: s: {kind: "memory"}
tools: {
	refund: {side_effecting: true, args: {type: "object", required: ["order_id"], properties: {order_id: type: "string"}}}
	fetch: {args: {type: "object", properties: {url: type: "string"}, additionalProperties: false}}
}
chains: tool: [
	{use: "idempotent", ttl: "1h", store: "s", tools: ["refund"], key_args: ["orderid"]},
	{use: "tool_policy", tools: ["fetch"], arg_patterns: [{arg: "uri", pattern: "^file:"}]},
]
`)
	var got []string
	for _, d := range vet.Run(a, vet.Inert) {
		got = append(got, d.Message)
	}
	assert.Equal(t, []string{
		"idempotent key_args[0] names argument \"orderid\", which side-effecting tool `refund` does not declare nor require: its args schema lets a call carry it, but a call without it is refused and does not run; declare and require it, or key on arguments every call carries; did you mean \"order_id\"?",
		"tool_policy arg_patterns[0] names argument \"uri\", which no tool it applies to declares: the pattern never matches; did you mean \"url\"?",
	}, got)
}

// A tool_policy with allow: [] refuses every tool, as the runtime does: no
// call reaches a layer inside it.
func TestReachEmptyAllow(t *testing.T) {
	a := analyze(t, `package p
tools: {
	refund: {side_effecting: true}
	search: {}
}
chains: tool: [
	{use: "tool_policy", allow: []},
	{use: "retry"},
]
`)
	retry := a.Policy.Chains["tool"][1]
	assert.Equal(t, "tool_policy", a.Blocker("refund").Use)
	assert.Equal(t, "tool_policy", a.Blocker("search").Use)
	assert.Empty(t, a.ToolsReaching(retry))
}

// A layer refuses a tool outright only where its when holds for every
// call of the tool: a tool_policy or guard whose when depends on the call
// or the run refuses some calls, and the others reach the layers inside it.
func TestReachConditionalBlocker(t *testing.T) {
	a := analyze(t, `package p
tools: {
	refund: {side_effecting: true}
	fetch: {url_arg: "url"}
	drop: {side_effecting: true}
}
chains: tool: [
	{use: "tool_policy", deny: ["refund"], when: "run.meta.?tier.orValue('') == 'trial'"},
	{use: "guard", name: "no_fetch", deny: "tool.url_arg != ''", when: "has(run.meta.sandbox)"},
	{use: "tool_policy", name: "no_drop", deny: ["drop"], when: "tool.side_effecting"},
	{use: "retry"},
]
`)
	assert.Nil(t, a.Blocker("refund"), "only a trial run's refunds are refused")
	assert.Nil(t, a.Blocker("fetch"), "only a sandboxed run's fetches are refused")
	assert.Equal(t, "no_drop", a.Blocker("drop").Name, "a when that holds for every call of the tool")
	retry := a.Policy.Chains["tool"][3]
	assert.True(t, a.Reaches(retry, "refund"))
}

// TestConstraintWhenValuesAndBounds: a when comparing config fields with
// strings and with numbers gets the reports of both checks from its one
// walk, in the order and with the messages each check gives: the strings'
// first, then the numbers'.
func TestConstraintWhenValuesAndBounds(t *testing.T) {
	a := analyze(t, `package p
tools: t: {}
chains: tool: [
	{use: "log", level: "info"},
	{use: "retry", max_attempts: 4},
	{use: "rate_limit", rate: 5, mode: "reject"},
]
constraints: [
	{id: "mixed", outer: "log", inner: "rate_limit", when: "inner.rate < 0 || outer.level == 'debugg' || inner.burst > 2000000000 || inner.mode in ['rejct', 'wait']", why: "w"},
	{id: "nested", outer: "retry", inner: "rate_limit", when: "(outer.max_attempts in [20, 2] && inner.mode != 'wiat') || 20 < outer.max_attempts", why: "w"},
]
`)
	var got []string
	for _, d := range a.Problems {
		got = append(got, fmt.Sprintf("%d:%d %s %s: %s", d.Pos.Line, d.Pos.Col, d.Severity, d.Rule, d.Message))
	}
	assert.Equal(t, []string{
		"9:91 error cel/unknown-value: constraint mixed: when: outer.level is never 'debugg': the schema of log allows 'debug', 'error', 'info' or 'warn' only, so outer.level == 'debugg' is always false, and the constraint may never apply; did you mean 'debug'?",
		"9:146 warning cel/unknown-value: constraint mixed: when: inner.mode is never 'rejct': the schema of rate_limit allows 'block', 'reject' or 'wait' only, so 'rejct' in the list never matches (its other values may); did you mean 'reject'?",
		"9:71 error cel/unknown-value: constraint mixed: when: the schema of rate_limit allows inner.rate from 1 to 1000000000 only, so inner.rate < 0 is always false, and the constraint may never apply",
		"9:117 error cel/unknown-value: constraint mixed: when: the schema of rate_limit allows inner.burst from 1 to 1000000000 only, so inner.burst > 2000000000 is always false, and the constraint may never apply",
		"10:109 error cel/unknown-value: constraint nested: when: inner.mode is never 'wiat': the schema of rate_limit allows 'block', 'reject' or 'wait' only, so inner.mode != 'wiat' is always true; did you mean 'wait'?",
		"10:85 warning cel/unknown-value: constraint nested: when: the schema of retry allows outer.max_attempts from 1 to 10 only, so 20 in the list never matches (its other values may)",
		"10:120 error cel/unknown-value: constraint nested: when: the schema of retry allows outer.max_attempts from 1 to 10 only, so outer.max_attempts > 20 is always false, and the constraint may never apply",
	}, got)
}

// TestConstraintWhenNestedBounds: a when comparing a field of a nested
// struct (a retry's breaker.failures, a meter's budget.calls) with a
// number its schema's bounds never reach is reported as a top-level one
// is, written with selects or with indexes; a nested field the bounds
// leave free, or the kind lacks, is not.
func TestConstraintWhenNestedBounds(t *testing.T) {
	a := analyze(t, `package p
tools: t: {}
chains: chat: [
	{use: "retry", breaker: {failures: 5}},
	{use: "meter", budget: {calls: 10}},
]
constraints: [
	{id: "deep", outer: "retry", inner: "meter", when: "outer.breaker.failures > 5000 || inner['budget']['calls'] < 1 || inner.budget.usd > 0.5 || outer.breaker.cooldown == '1s' || outer.breaker.nope > 1", why: "w"},
]
`)
	var got []string
	for _, d := range a.Problems {
		got = append(got, fmt.Sprintf("%d:%d %s %s: %s", d.Pos.Line, d.Pos.Col, d.Severity, d.Rule, d.Message))
	}
	assert.Equal(t, []string{
		"8:79 error cel/unknown-value: constraint deep: when: the schema of retry allows outer.breaker.failures from 1 to 1000 only, so outer.breaker.failures > 5000 is always false, and the constraint may never apply",
		"8:114 error cel/unknown-value: constraint deep: when: the schema of meter allows inner.budget.calls from 1 to 1000000000 only, so inner.budget.calls < 1 is always false, and the constraint may never apply",
	}, got)
}
