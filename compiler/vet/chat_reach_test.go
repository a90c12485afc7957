package vet_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

func TestChatWhen(t *testing.T) {
	a := analyze(t, `package p
models: {a: {}, b: {}}
chains: chat: [
	{use: "log", name: "only_a", when: "request.model == 'a'"},
	{use: "log", name: "messages", when: "size(request.messages) > 3"},
	{use: "log", name: "a_or_long", when: "request.model == 'a' || size(messages) > 3"},
	{use: "log", name: "b_and_run", when: "request.model == 'b' && run.agent == 'x'"},
	{use: "log", name: "all"},
]
`)
	chain := a.Policy.Chains["chat"]
	onlyA, messages, aOrLong, bAndRun, all := chain[0], chain[1], chain[2], chain[3], chain[4]
	assert.Equal(t, vet.Always, a.ChatWhen(onlyA, "a"))
	assert.Equal(t, vet.Never, a.ChatWhen(onlyA, "b"))
	assert.Equal(t, vet.Depends, a.ChatWhen(onlyA, ""), "an unknown model")
	assert.Equal(t, vet.Depends, a.ChatWhen(messages, "a"))
	assert.Equal(t, vet.Always, a.ChatWhen(aOrLong, "a"))
	assert.Equal(t, vet.Depends, a.ChatWhen(aOrLong, "b"))
	assert.Equal(t, vet.Never, a.ChatWhen(bAndRun, "a"))
	assert.Equal(t, vet.Depends, a.ChatWhen(bAndRun, "b"))
	assert.Equal(t, vet.Always, a.ChatWhen(all, "b"))

	assert.Equal(t, vet.Never, a.ChatMeet(onlyA, bAndRun), "provably disjoint")
	assert.False(t, a.Overlap(onlyA, bAndRun))
	assert.Equal(t, vet.Always, a.ChatMeet(onlyA, messages), "one when on the model, one on the messages")
	assert.Equal(t, vet.Depends, a.ChatMeet(messages, bAndRun), "two whens on more than the model")
	assert.Equal(t, vet.Always, a.ChatMeet(all, bAndRun))
}

func TestChatMeetThroughFallback(t *testing.T) {
	a := analyze(t, `package p
models: {a: {}, b: {}}
chains: chat: [
	{use: "log", name: "for_a", when: "request.model == 'a'"},
	{use: "fallback", models: ["a", "b"]},
	{use: "log", name: "for_b", when: "request.model == 'b'"},
]
`)
	chain := a.Policy.Chains["chat"]
	assert.Equal(t, vet.Always, a.ChatMeet(chain[0], chain[2]), "below the fallback a call of a is also one of b")
	assert.Equal(t, vet.Always, a.ChatMeet(chain[2], chain[0]), "either order")
}

func TestChatMeetWithoutModels(t *testing.T) {
	a := analyze(t, `package p
chains: chat: [
	{use: "log", name: "x", when: "request.model == 'a'"},
	{use: "log", name: "y", when: "request.model == 'b'"},
]
`)
	chain := a.Policy.Chains["chat"]
	assert.Equal(t, vet.Depends, a.ChatMeet(chain[0], chain[1]), "with no model declared, a call's model is unknown")
}

// TestDependsKeepsTheSeverity checks that an error-severity ordering whose
// layers' whens decide whether they meet is still an error, saying so, and
// one whose whens keep them apart is not reported at all.
func TestDependsKeepsTheSeverity(t *testing.T) {
	for _, tc := range []struct {
		name, chain string
		want        dsl.Severity // "" for none
	}{
		{"no whens", `{use: "meter", budget: {tokens: 10}}, {use: "compaction"}`, dsl.Error},
		{"disjoint", `{use: "meter", when: "request.model == 'a'", budget: {tokens: 10}}, {use: "compaction", when: "request.model == 'b'"}`, ""},
		{"depends", `{use: "meter", when: "size(messages) > 2", budget: {tokens: 10}}, {use: "compaction", when: "run.agent == 'x'"}`, dsl.Error},
		{"model and messages", `{use: "meter", when: "request.model == 'a'", budget: {tokens: 10}}, {use: "compaction", when: "size(messages) > 2"}`, dsl.Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := analyze(t, "package p\nmodels: {a: {}, b: {}}\nchains: chat: ["+tc.chain+"]\n")
			var got []dsl.Diagnostic
			for _, d := range vet.Run(a, vet.CompactionBeforeMeter) {
				if d.Rule == vet.CompactionBeforeMeter.Name {
					got = append(got, d)
				}
			}
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, tc.want, got[0].Severity)
			depends := tc.name == "depends"
			assert.Equal(t, depends, len(a.Pairs) == 1 && a.Pairs[0].Depends)
			assert.Equal(t, depends, strings.Contains(got[0].Message, "whether it happens depends on"), got[0].Message)
		})
	}
}

func TestOwnCallMeet(t *testing.T) {
	a := analyze(t, `package p
models: {primary: {}, verdict: {}}
chains: chat: [
	{use: "rate_limit", rate: 1, when: "request.model == 'primary'"},
	{use: "meter", when: "request.model == 'verdict'"},
	{use: "judge", model: "verdict"},
	{use: "judge", name: "never", model: "verdict", when: "request.model == 'nope'"},
]
`)
	chain := a.Policy.Chains["chat"]
	limit, meter, judge, never := chain[0], chain[1], chain[2], chain[3]
	assert.Equal(t, vet.Never, a.OwnCallMeet(judge, limit), "the limit never sees the verdict model's calls")
	assert.Equal(t, vet.Always, a.OwnCallMeet(judge, meter))
	assert.Equal(t, vet.Never, a.OwnCallMeet(never, meter), "a judge whose when is always false makes no call")
	var ids []string
	for _, p := range a.Pairs {
		ids = append(ids, p.Constraint.ID+":"+p.Inner.Ref())
	}
	assert.Contains(t, ids, "judge-before-meter:meter")
	assert.NotContains(t, ids, "ratelimit-outside-judge:rate_limit")
}
