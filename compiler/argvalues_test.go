package compiler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/dsl"
)

// argValueFindings compiles src and lists its cel/unknown-value findings as
// "LINE SEVERITY: MESSAGE".
func argValueFindings(t *testing.T, src string) []string {
	t.Helper()
	got, _ := findings(t, src, ruleUnknownValue)
	return got
}

// ruleFindings compiles src and lists its findings of rule as "LINE
// SEVERITY: MESSAGE"; an error of another rule fails the test, as a
// policy the case did not mean.
func ruleFindings(t *testing.T, src, rule string) []string {
	t.Helper()
	got, others := findings(t, src, rule)
	for _, d := range others {
		assert.NotEqual(t, dsl.Error, d.Severity, "%s", d)
	}
	return got
}

// findings compiles src and lists its findings of rule as ruleFindings
// does, with the diagnostics of other rules.
func findings(t *testing.T, src, rule string) (got []string, others dsl.Diagnostics) {
	t.Helper()
	c, err := Compile(context.Background(), []string{writePolicy(t, src)}, Options{})
	require.NoError(t, err)
	for _, d := range c.Diagnostics {
		if d.Rule == rule {
			got = append(got, fmt.Sprintf("%d %s: %s", d.Pos.Line, d.Severity, d.Message))
		} else {
			others = append(others, d)
		}
	}
	return got, others
}

// assertPrefixes asserts that got holds as many findings as want, each
// beginning with its want.
func assertPrefixes(t *testing.T, got, want []string) bool {
	t.Helper()
	if !assert.Len(t, got, len(want), strings.Join(got, "\n")) {
		return false
	}
	ok := true
	for i, w := range want {
		ok = assert.True(t, strings.HasPrefix(got[i], w), "got %s\nwant %s", got[i], w) && ok
	}
	return ok
}

const payTools = `package p

tools: {
	pay: {side_effecting: true, args: {type: "object", required: ["currency", "amount", "level", "tags"], properties: {
		currency: {type: "string", enum: ["EUR", "USD"]}
		amount: {type: "number", exclusiveMinimum: 0, maximum: 5000}
		level: {type: "integer", enum: [1, 2, 3]}
		tags: {type: "array", items: {type: "string", enum: ["fast", "slow"]}}
	}}}
	refund: {args: {type: "object", required: ["currency"], properties: {
		currency: {type: "string", enum: ["GBP", "USD"]}
	}}}
}
`

// A constant an argument's enum does not hold: an == never holds and a
// deny with it never fires (an error), with the enum's value that differs
// in case only as the did-you-mean; a dead constant of a list that may
// match is a warning; a != always true in a deny only blocks more (a
// warning), in a require lets calls through (an error); an == always
// false in a require only blocks more (a warning). An entry scoped to
// several tools sees the union of their values.
func TestArgEnumValues(t *testing.T) {
	got := argValueFindings(t, payTools+`chains: tool: [
	{use: "guard", tools: ["pay"], deny: "args.currency == 'usd'"},
	{use: "guard", tools: ["pay"], name: "b", deny: "args.currency in ['EUR', 'JPY']"},
	{use: "guard", tools: ["pay"], name: "c", deny: "args.currency != 'JPY' && args.amount > 100.0"},
	{use: "guard", tools: ["pay"], name: "d", require: "args.currency != 'JPY' && args.amount > 100.0"},
	{use: "guard", tools: ["pay"], name: "e", require: "args.currency == 'EUR' || args.currency == 'JPY'"},
	{use: "guard", tools: ["pay", "refund"], name: "f", deny: "args.currency == 'GBP' || args.currency == 'CHF'"},
	{use: "guard", tools: ["pay"], name: "g", deny: "args.tags.exists(t, t == 'urgent')"},
]
`)
	const schema = "it is one of the values the args schema of `pay` allows ('EUR', 'USD'; a call's arguments are checked against its tool's schema before any layer)"
	assert.Equal(t, []string{
		"15 error: args.currency is never 'usd': " + schema + ", so args.currency == 'usd' is always false; did you mean 'USD'?",
		"16 warning: args.currency is never 'JPY': " + schema + ", so 'JPY' in the list never matches (its other values may)",
		"17 warning: args.currency is never 'JPY': " + schema + ", so args.currency != 'JPY' is always true: it can only make the deny block more calls, never fewer",
		"18 warning: args.currency is never 'JPY': " + schema + ", so args.currency != 'JPY' is always true; " + schemaRefuses,
		"19 warning: args.currency is never 'JPY': " + schema + ", so args.currency == 'JPY' is always false: it can only make the require block more calls, never fewer",
		"20 warning: args.currency is never 'CHF': it is one of the values the args schemas of `pay`, `refund` allow ('EUR', 'GBP', 'USD'; a call's arguments are checked against its tool's schema before any layer), so args.currency == 'CHF' is always false; " + schemaRefuses,
		"21 warning: args.tags[] is never 'urgent': it is one of the values the args schema of `pay` allows ('fast', 'slow'; a call's arguments are checked against its tool's schema before any layer), so args.tags[] == 'urgent' is always false; " + schemaRefuses,
	}, got)
}

// A comparison with a number an argument's bounds or enum decide: beyond
// the bound, whichever side the constant is written on, it never (or
// always) holds. A test at the bound or of the sign restates what the
// schema refuses and is not reported, unless it makes the guard block
// every call (a warning).
func TestArgNumberBounds(t *testing.T) {
	got := argValueFindings(t, payTools+`chains: tool: [
	{use: "guard", tools: ["pay"], deny: "args.amount > 10000.0"},
	{use: "guard", tools: ["pay"], name: "b", deny: "10000.0 < args.amount && args.currency == 'EUR'"},
	{use: "guard", tools: ["pay"], name: "c", deny: "args.level == 7"},
	{use: "guard", tools: ["pay"], name: "d", deny: "args.level in [2, 9]"},
	{use: "guard", tools: ["pay"], name: "e", deny: "args.amount <= 5000.0"},
	{use: "guard", tools: ["pay"], name: "f", require: "args.amount > 0.0 && args.amount <= 5000.0"},
	{use: "guard", tools: ["pay"], name: "g", deny: "args.amount <= 0.0 || args.amount > 5000.0 || args.level >= 4 || args.level < 1"},
	{use: "guard", tools: ["pay"], name: "h", deny: "args.amount > 4000.0 && args.level != 2"},
]
`)
	assert.Equal(t, []string{
		"15 warning: args.amount > 10000.0 is always false: the args schema of `pay` gives args.amount exclusiveMinimum: 0, maximum: 5000, and a call's arguments are checked against its tool's schema before any layer; " + schemaRefuses,
		"16 warning: args.amount > 10000.0 is always false: the args schema of `pay` gives args.amount exclusiveMinimum: 0, maximum: 5000, and a call's arguments are checked against its tool's schema before any layer; " + schemaRefuses,
		"17 warning: args.level == 7 is always false: the args schema of `pay` gives args.level enum: [1, 2, 3], and a call's arguments are checked against its tool's schema before any layer; " + schemaRefuses,
		"18 warning: 9 in the list never matches (its other values may): the args schema of `pay` gives args.level enum: [1, 2, 3], and a call's arguments are checked against its tool's schema before any layer",
		"19 warning: args.amount <= 5000.0 is always true: the args schema of `pay` gives args.amount exclusiveMinimum: 0, maximum: 5000, and a call's arguments are checked against its tool's schema before any layer; it can only make the deny block more calls, never fewer",
	}, got)
}

// Nothing is said where a call may carry a value the schemas do not
// describe: an unscoped entry when a tool's schema is open to other
// arguments, a tool without a schema, an enum that holds other kinds or
// null, a file_check path_arg (resolved to the real path before the inner
// layers), a macro over an object (its keys), a number type without
// bounds. An unscoped entry whose other tools shut the argument out sees
// the values of those that list it.
func TestArgValuesOnlyWhereCertain(t *testing.T) {
	got := argValueFindings(t, `package p

tools: {
	pay: {args: {type: "object", required: ["currency", "mixed", "maybe", "path", "meta", "n"], properties: {
		currency: {type: "string", enum: ["EUR", "USD"]}
		mixed: {enum: ["EUR", 5]}
		maybe: {enum: ["EUR", null]}
		path: {type: "string", enum: ["a.txt", "b.txt"]}
		meta: {type: "object", properties: k: type: "string", items: {enum: ["x"]}}
		n: {type: "number"}
	}}, path_arg: "path"}
	search: {args: {type: "object", properties: q: type: "string"}}
	free: {}
}
chains: tool: [
	{use: "guard", deny: "args.currency == 'JPY'"},
	{use: "guard", tools: ["pay", "free"], name: "b", deny: "args.currency == 'JPY'"},
	{use: "guard", tools: ["pay"], name: "c", deny: "args.mixed == 'JPY' || args.mixed == 7.0 || args.maybe == 'JPY'"},
	{use: "guard", tools: ["pay"], name: "d", deny: "args.path == '/srv/a.txt'"},
	{use: "guard", tools: ["pay"], name: "e", deny: "args.meta.exists(k, k == 'y')"},
	{use: "guard", tools: ["pay"], name: "f", deny: "args.n > 1e9"},
]
`)
	assert.Empty(t, got)

	got = argValueFindings(t, `package p

tools: {
	pay: {args: {type: "object", required: ["currency"], properties: currency: {type: "string", enum: ["EUR", "USD"]}}}
	search: {args: {type: "object", additionalProperties: false, properties: q: type: "string"}}
}
chains: tool: [
	{use: "guard", deny: "tool.name == 'pay' && args.currency == 'JPY'"},
]
`)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "8 warning: args.currency is never 'JPY'")
	assert.Contains(t, got[0], schemaRefuses)
}
