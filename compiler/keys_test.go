package compiler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNameList(t *testing.T) {
	assert.Equal(t, "a", nameList([]string{"a"}))
	assert.Equal(t, "a, b, c, d, e", nameList([]string{"a", "b", "c", "d", "e"}))
	assert.Equal(t, "a, b, c, d, e and 2 more", nameList([]string{"a", "b", "c", "d", "e", "f", "g"}))
}

// A key of an optional map read untested is warned about wherever a
// predicate reads it, and the message says what the failed read does there.
func TestOptionalKeysSayWhatFails(t *testing.T) {
	dir := writePolicy(t, `package p

tools: t: {}
admit: "item.metadata.tier == 'gold'"
chains: tool: [
	{use: "guard", name: "open", deny: "run.meta.tier == 'free'", on_error: "open"},
	{use: "guard", name: "closed", deny: "run.meta.tier == 'free' && run.meta['x-y'] == 'z'"},
	{use: "guard", name: "tested", deny: "has(run.meta.tier) && run.meta.tier == 'free'"},
]
state: fields: limit: {
	schema: {type: "integer"}
	on_set: [{deny: "run.meta.tier == 'free'"}, {set: "run.meta.cap"}]
}
`)
	c, got := compileDiagnostics(t, dir, ruleUncheckedKey, true)
	assert.Equal(t, []string{
		`4:23 cel/unchecked-key: where item.metadata has no key "tier", reading it fails, and admit fails closed: the item is dropped, unless the rest of the predicate decides it; test it first (!has(item.metadata.tier) || ...) or read item.metadata.?tier.orValue(...)`,
		`6:47 cel/unchecked-key: where run.meta has no key "tier", reading it fails, and the guard fails open (on_error "open"): the call passes unchecked, unless the rest of the predicate decides it; test it first (!has(run.meta.tier) || ...) or read run.meta.?tier.orValue(...)`,
		`7:49 cel/unchecked-key: where run.meta has no key "tier", reading it fails, and the guard fails closed (on_error "closed"): the call is blocked, unless the rest of the predicate decides it; test it first (!has(run.meta.tier) || ...) or read run.meta.?tier.orValue(...)`,
		`7:76 cel/unchecked-key: where run.meta has no key "x-y", reading it fails, and the guard fails closed (on_error "closed"): the call is blocked, unless the rest of the predicate decides it; test it first (!('x-y' in run.meta) || ...) or read run.meta[?'x-y'].orValue(...)`,
		`12:28 cel/unchecked-key: where run.meta has no key "tier", reading it fails, and the handler fails closed: the value is refused, unless the rest of the predicate decides it; test it first (!has(run.meta.tier) || ...) or read run.meta.?tier.orValue(...)`,
		`12:62 cel/unchecked-key: where run.meta has no key "cap", reading it fails, and the set handler fails: the value is refused, unless the rest of the predicate decides it; test it first (!has(run.meta.cap) || ...) or read run.meta.?cap.orValue(...)`,
	}, got, "%v", c.Diagnostics)
}

// An unscoped guard reading an argument no declared tool has, but close to
// one a tool has (a misspelt amount), names the argument meant.
func TestUnscopedArgKeyTypo(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: {args: {type: "object", properties: amount: type: "number"}}
chains: tool: [
	{use: "guard", name: "typo", deny: "args.amont > 100.0"},
	{use: "guard", name: "known", deny: "args.amount > 100.0"},
]
`)
	c, got := compileDiagnostics(t, dir, ruleUncheckedKey, true)
	require.Len(t, got, 2, "%v", c.Diagnostics)
	assert.True(t, strings.HasPrefix(got[0], `5:43 cel/unchecked-key: `), got[0])
	assert.True(t, strings.HasSuffix(got[0], `; no declared tool's args has "amont": did you mean "amount"?`), got[0])
	assert.NotContains(t, got[1], "did you mean")
}
