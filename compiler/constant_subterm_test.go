package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/dsl"
)

// A contradiction (or a tautology) in a chain that does not decide the
// predicate, nested under an ||, a ! or a ternary, is a dead term of its
// own: an error where the value it is stuck at can let calls through, a
// warning where it can only block more. Chains whose terms can each hold,
// comparisons of a double (NaN), and tests in separate comprehensions are
// no finding; a chain that decides the predicate is reported once, as
// deciding it.
func TestConstantDeadSubterms(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: {side_effecting: true, args: {type: "object", required: ["amount", "count", "score", "items"], properties: {amount: {type: "number"}, count: {type: "integer"}, score: {type: "number"}, note: {type: "string"}, items: {type: "array", items: type: "integer"}}}}
chains: tool: [
	{use: "guard", name: "or", tools: ["refund"], deny: "args.amount > 100.0 || (args.count == 1 && args.count == 2)"},
	{use: "guard", name: "or_require", tools: ["refund"], require: "args.amount > 100.0 || (args.count == 1 && args.count == 2)"},
	{use: "guard", name: "not", tools: ["refund"], deny: "args.amount > 100.0 && !(args.count > 5 && args.count < 2)"},
	{use: "guard", name: "not_require", tools: ["refund"], require: "args.amount > 100.0 && !(args.count > 5 && args.count < 2)"},
	{use: "guard", name: "ternary", tools: ["refund"], deny: "args.amount > 100.0 ? (tool.name == 'a' && tool.name == 'b') : args.count > 3"},
	{use: "guard", name: "cover", tools: ["refund"], deny: "args.amount > 100.0 && (args.count >= 0 || args.count < 0)"},
	{use: "guard", name: "presence", tools: ["refund"], require: "args.amount > 5.0 && (has(args.note) && !has(args.note) || args.count > 2)"},
	{use: "guard", name: "deep", tools: ["refund"], deny: "args.amount > 5.0 && (args.count > 2 || !(args.amount < 1.0 || (args.count == 3 && args.count == 4)))"},
	{use: "guard", name: "flat", tools: ["refund"], deny: "args.amount > 100.0 && (args.count == 1 && args.count == 2)"},
	{use: "guard", name: "negated_decides", tools: ["refund"], deny: "args.amount > 100.0 || !(args.count == 1 && args.count == 2)"},
	{use: "guard", name: "clean_range", tools: ["refund"], deny: "args.amount > 100.0 || (args.count > 1 && args.count < 5)"},
	{use: "guard", name: "clean_nan", tools: ["refund"], deny: "args.count > 3 && (args.score >= 0.0 || args.score < 0.0)"},
	{use: "guard", name: "clean_same", tools: ["refund"], deny: "args.amount > 100.0 || !(args.count == 1 && args.count == 1)"},
	{use: "guard", name: "clean_fields", tools: ["refund"], deny: "args.amount > 100.0 || (tool.name == 'a' && args.note == 'b')"},
	{use: "guard", name: "clean_scopes", tools: ["refund"], deny: "args.amount > 1.0 || (args.items.exists(i, i > 5) && args.items.exists(i, i < 2))"},
]
`)
	c, got := compileDiagnostics(t, dir, ruleConstant, false)
	assert.Equal(t, []string{
		"5:79 cel/constant",   // the && under the deny's ||
		"6:90 cel/constant",   // the same in a require
		"7:81 cel/constant",   // under a !
		"8:92 cel/constant",   // under a ! in a require
		"9:103 cel/constant",  // a ternary's branch
		"10:82 cel/constant",  // a tautology under &&
		"11:104 cel/constant", // has && !has under ||
		"12:121 cel/constant", // three levels down, under a !
		"13:81 cel/constant",  // one chain with the deny's &&: decides it
		"14:93 cel/constant",  // !(contradiction) under ||: decides it, once
	}, got)
	want := map[int]dsl.Severity{5: dsl.Error, 6: dsl.Warning, 7: dsl.Warning, 8: dsl.Error, 9: dsl.Error, 10: dsl.Warning, 11: dsl.Warning, 12: dsl.Warning}
	for _, d := range c.Diagnostics {
		if d.Rule != ruleConstant {
			continue
		}
		if sev, ok := want[d.Pos.Line]; ok {
			assert.Equal(t, sev, d.Severity, "line %d: %s", d.Pos.Line, d.Message)
			assert.Contains(t, d.Message, "dead", "line %d", d.Pos.Line)
		}
	}
	var msg string
	for _, d := range c.Diagnostics {
		if d.Rule == ruleConstant && d.Pos.Line == 5 {
			msg = d.Message
		}
	}
	require.NotEmpty(t, msg)
	assert.Contains(t, msg, "args.count == 1 and args.count == 2 cannot both hold")
	assert.Contains(t, msg, "always false")
}
