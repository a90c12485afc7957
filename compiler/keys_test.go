package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
